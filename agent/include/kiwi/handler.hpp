// kiwi-agent plugin SDK: HTTP route-handler plugins (CGI-style: a Request in, a Response out).
//
// Life cycle and threading:
//   - The factory runs once per [[route]] entry on the main thread before the server starts. It may
//     throw std::exception to refuse its options; start-up then stops with exit code 2.
//   - handle() is called CONCURRENTLY from the HTTP worker threads: it must be thread-safe. Prefer
//     immutable state built in the constructor, and the read-only DataSource below.
//   - Everything in a Request is borrowed from the server and valid only during handle().
//   - The server answers HEAD with the GET headers and no body, 404 for unknown paths, and 405
//     (with `Allow: <methods()>`) for a method the handler does not list in methods(): by
//     default a handler only sees GET and HEAD. CORS preflights (OPTIONS) are the server's.
//   - The object is destroyed (after the server has stopped) before its shared object is unloaded.
#pragma once

#include <boost/dll/alias.hpp>
#include <cstdio>
#include <memory>
#include <optional>

#include "kiwi/plugin.hpp"
#include "kiwi/sensor.hpp"

namespace kiwi {

struct Param {
  std::string_view name;
  std::string_view value;  // percent-decoded; empty for `?flag` and `?flag=`
};

struct Request {
  std::string_view method;  // "GET", "HEAD", or another one the handler lists in methods()
  std::string_view path;    // decoded path without the query string
  std::span<const Param> query;
  std::span<const Param> headers;
  std::string_view remote_address;  // "127.0.0.1" or "::1"
  std::string_view body;            // empty for GET/HEAD unless a client sent one
  // The query string as the client sent it, undecoded, without the '?' ("" when there is none).
  std::string_view raw_query;
  std::string_view protocol;       // "HTTP/1.1" or "HTTP/1.0", as the request line says
  std::string_view local_address;  // the address the request came in on: "127.0.0.1", "::1"
  std::uint16_t local_port = 0;    // and its port

  // Number of times a query parameter occurs (to reject `?limit=1&limit=2`).
  std::size_t count(std::string_view name) const {
    std::size_t n = 0;
    for (const auto& p : query) n += p.name == name;
    return n;
  }
  std::optional<std::string_view> param(std::string_view name) const {
    for (const auto& p : query)
      if (p.name == name) return p.value;
    return std::nullopt;
  }
  // Header lookup, case-insensitive on the name.
  std::optional<std::string_view> header(std::string_view name) const {
    for (const auto& h : headers) {
      if (h.name.size() != name.size()) continue;
      bool same = true;
      for (std::size_t i = 0; i < name.size() && same; ++i)
        same = (h.name[i] | 0x20) == (name[i] | 0x20);
      if (same) return h.value;
    }
    return std::nullopt;
  }
  // Whether Accept-Encoding allows gzip: "gzip" (any case) as a coding, not refused with a
  // q-value of 0 (RFC 9110 section 12.5.3). The server compresses for such clients; handlers
  // need not look.
  bool accepts_gzip() const;
};

// RFC 9110 section 13.1.2: whether an If-None-Match field value ("*", or a list of entity tags,
// each possibly weak: `"1", W/"23"`) matches `etag` by weak comparison (W/ ignored on both sides).
// The server answers 304 for a GET or HEAD whose 200 response carries a matching ETag: handlers
// only set the ETag header.
inline bool etag_matches(std::string_view if_none_match, std::string_view etag) {
  auto opaque = [](std::string_view t) {
    if (t.size() >= 2 && (t[0] == 'W' || t[0] == 'w') && t[1] == '/') t.remove_prefix(2);
    return t;
  };
  const std::string_view want = opaque(etag);
  std::string_view rest = if_none_match;
  while (!rest.empty()) {
    std::size_t i = 0;
    while (i < rest.size() && (rest[i] == ' ' || rest[i] == '\t' || rest[i] == ',')) ++i;
    rest.remove_prefix(i);
    if (rest.empty()) break;
    if (rest[0] == '*') return true;
    std::size_t start =
        (rest.size() >= 2 && (rest[0] == 'W' || rest[0] == 'w') && rest[1] == '/') ? 2 : 0;
    if (start >= rest.size() || rest[start] != '"') return false;  // malformed: no match
    std::size_t close = rest.find('"', start + 1);
    if (close == std::string_view::npos) return false;
    if (opaque(rest.substr(0, close + 1)) == want) return true;
    rest.remove_prefix(close + 1);
  }
  return false;
}

inline bool Request::accepts_gzip() const {
  auto ae = header("Accept-Encoding");
  if (!ae) return false;
  auto lower = [](char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c); };
  auto trim = [](std::string_view t) {
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
    while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
    return t;
  };
  auto equals_ci = [&](std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (lower(a[i]) != b[i]) return false;
    return true;
  };
  std::string_view rest = *ae;
  while (!rest.empty()) {
    std::size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    std::size_t semi = item.find(';');
    if (!equals_ci(trim(item.substr(0, semi)), "gzip") &&
        !equals_ci(trim(item.substr(0, semi)), "x-gzip"))
      continue;
    if (semi == std::string_view::npos) return true;
    // Parameters: only q matters; q=0, 0.0, 0.00 and 0.000 refuse it.
    std::string_view q = trim(item.substr(semi + 1));
    if (q.size() < 2 || lower(q[0]) != 'q' || q[1] != '=') return true;
    q = trim(q.substr(2));
    if (q.empty() || q[0] != '0') return true;
    for (std::size_t i = 1; i < q.size(); ++i)
      if (q[i] != '.' && q[i] != '0') return true;
    return false;
  }
  return false;
}

struct Header {
  std::string name;
  std::string value;
};

// A shared immutable response body: bytes and what keeps them alive. A body built once (per
// snapshot, say) is served to every client without a copy, also across the C ABI (kiwi_body), and
// the server compresses it once, keyed by its identity (the address of its bytes: the same
// address means the same bytes while any copy of the Body lives). So return the same Body for
// the same bytes, and never change bytes a Body points to.
//   res.body = std::make_shared<const std::string>(text);   // the usual way
//   res.body->size(), *res.body (a std::string_view)
class Body {
 public:
  Body() = default;
  Body(std::nullptr_t) {}
  // NOLINTNEXTLINE(google-explicit-constructor): a string body is the common case
  Body(std::shared_ptr<const std::string> s)
      : bytes_(s ? std::string_view(*s) : std::string_view()), keep_(std::move(s)) {}
  // NOLINTNEXTLINE(google-explicit-constructor)
  Body(std::shared_ptr<std::string> s) : Body(std::shared_ptr<const std::string>(std::move(s))) {}
  // Bytes kept alive by `keep` (static storage: keep may be null).
  Body(std::shared_ptr<const void> keep, std::string_view bytes)
      : bytes_(bytes), keep_(std::move(keep)), set_(true) {}

  explicit operator bool() const { return keep_ != nullptr || set_; }
  const std::string_view& operator*() const { return bytes_; }
  const std::string_view* operator->() const { return &bytes_; }
  std::string_view view() const { return bytes_; }
  const void* identity() const { return bytes_.data(); }
  const std::shared_ptr<const void>& keep() const { return keep_; }
  void reset() { *this = Body(); }
  bool operator==(std::nullptr_t) const { return !*this; }

 private:
  std::string_view bytes_;
  std::shared_ptr<const void> keep_;
  bool set_ = false;  // a body of static bytes, which has no keep
};
// What a handler answers. Compression is the server's: for a client that accepts gzip, a body of
// a textual type (text/*, JSON, JavaScript, XML, SVG) of 1 KiB or more goes out gzip-compressed,
// with "Vary: Accept-Encoding" on every response of such a type. A response with an ETag header
// stands for a version served again: its gzip is made once per Body (by identity) and kept for
// a while; any other is compressed per request. A handler that sets Content-Encoding itself
// (a CGI program's gzip) is sent as it is.
struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<Header> headers;  // extra headers (ETag, Cache-Control, ...)
  Body body;                    // null means empty

  // A JSON error body in the API's one error shape:
  //   {"error":{"status":400,"parameter":"limit","message":"..."}}  ("parameter" only if given)
  static Response error(int status, std::string_view message, std::string_view parameter = {});
};

// --- Data the host shares with handlers (read-only) ----------------------------------------------

struct MetricValue {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0;
  std::string unit;
  MetricKind kind = MetricKind::gauge;
};

enum class SensorState : std::uint32_t { ok, no_data, error };

inline std::string_view to_string(SensorState s) {
  return s == SensorState::ok ? "ok" : s == SensorState::no_data ? "no_data" : "error";
}

struct SensorReport {
  std::string name;    // [[sensor]] name
  std::string plugin;  // plugin name
  SensorState state = SensorState::ok;
  std::string message;
  double timestamp = 0;                     // unix seconds of this sensor's last reading
  double duration_seconds = 0;              // how long its last sample() took
  std::uint64_t errors_total = 0;           // samples that threw since the agent started
  std::uint64_t invalid_metrics_total = 0;  // metrics the host dropped (kiwi/sensor.hpp rules)
  std::vector<MetricValue> metrics;
};

// The latest sample, immutable once published. kiwi/json.hpp render_snapshot_json makes the
// /api/current body of it.
struct Snapshot {
  std::uint64_t sequence = 0;  // 1 for the first sample; the ETag of /api/current
  double timestamp = 0;        // unix seconds of the tick
  double interval_seconds = 1;
  double stale_after_seconds = 3;
  std::string host;
  std::string agent_version;
  double started_at = 0;  // unix seconds the agent started (uptime = timestamp - started_at)
  std::vector<SensorReport> sensors;
};

// A loaded plugin instance, for /api/plugins.
struct PluginStatus {
  std::string name;  // sensor instance name, or the route path for a handler
  PluginKind kind = PluginKind::sensor;
  std::string plugin;  // the plugin's own name
  std::string file;
  std::uint32_t abi_version = 0;
  std::span<const MetricSpec> metrics;  // the plugin's metric table (valid while it is loaded)
  std::shared_ptr<const void> library;  // keeps the plugin loaded while this copy lives
};

struct HttpRequestCount {
  std::string route;  // configured route path; "unmatched" for 404s
  int status = 0;
  std::uint64_t count = 0;
};

// The configuration in force, and how the latest reload (SIGHUP) went.
struct ConfigStatus {
  std::uint64_t generation = 1;        // 1 at start; +1 for every reload that applied
  double loaded_at = 0;                // unix seconds the running configuration took effect
  std::string source;                  // its file, or "<built-in default>"
  std::string reload_status = "none";  // "none" (never reloaded), "ok" or "failed"
  double reload_at = 0;                // unix seconds of the latest reload (0: none)
  std::string reload_message;          // a failed reload's error, as --check-config words it
  std::uint64_t reloads_ok = 0;
  std::uint64_t reloads_failed = 0;
};

// Counters of the running agent, for /api/health, /api/plugins and /metrics.
struct AgentStats {
  std::string version;
  double started_at = 0;  // unix seconds
  std::uint64_t ticks = 0;
  std::uint64_t missed_ticks = 0;
  std::uint64_t store_write_errors = 0;    // since start
  std::uint64_t store_failing_writes = 0;  // history commits failed in a row (0 = healthy)
  std::string store_last_error;
  std::string snapshot_file;                // collector.snapshot_path ("" when off)
  std::uint64_t snapshot_file_errors = 0;   // failed writes since start
  std::uint64_t snapshot_file_failing = 0;  // failed in a row (0 = healthy)
  std::string snapshot_file_last_error;
  std::vector<PluginStatus> plugins;
  std::vector<HttpRequestCount> http_requests;
  ConfigStatus config;
};

// A history query. Limits are checked by the handler; the store trusts them.
enum class Aggregate : std::uint32_t { mean, max, min, last };

struct HistoryQuery {
  std::size_t limit = 120;            // latest N samples (or buckets) within [since, until]
  std::optional<double> since;        // unix seconds, inclusive
  std::optional<double> until;        // unix seconds, inclusive
  std::vector<std::string> patterns;  // series names or keys, `*` globs; empty means all
  double step = 0;                    // > 0: buckets of `step` seconds, aligned to multiples of it
  Aggregate aggregate = Aggregate::mean;
};

struct HistorySeries {
  std::string key;  // `name` or `name{label="value",...}`, unique within a result
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;
  std::string unit;
  MetricKind kind = MetricKind::gauge;
  std::vector<double> values;  // one per timestamp; NaN where the series has no value
};

struct HistoryResult {
  std::vector<double> timestamps;  // unix seconds, oldest first
  std::vector<HistorySeries> series;
};

// Thrown by DataSource::history when the store cannot answer (I/O error, corrupt database).
struct StoreError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Provided by the host; every member is thread-safe and outlives all handlers.
class DataSource {
 public:
  // The latest published snapshot; never null (sequence 0 before the first tick).
  virtual std::shared_ptr<const Snapshot> snapshot() const = 0;
  // Reads through a read-only connection of the calling worker thread. Throws StoreError.
  virtual HistoryResult history(const HistoryQuery& query) const = 0;
  // A consistent copy of the agent's counters; cheap enough to call per request.
  virtual AgentStats stats() const = 0;
  // Names and units of every series the store holds (for validating `series` patterns).
  virtual std::vector<std::string> series_names() const = 0;

 protected:
  ~DataSource() = default;
};

class Handler {
 public:
  virtual ~Handler() = default;
  virtual Response handle(const Request& request) = 0;
  // The methods handle() takes, as the Allow header lists them. The router answers any other
  // method with 405 and this list, comparing whole, case-sensitive tokens (RFC 9110 section 9.1).
  virtual std::string_view methods() const { return "GET, HEAD"; }
};

// Handed to the factory; valid only during the factory call, except `data` and `log`, which
// outlive the handler.
struct HandlerContext {
  std::string_view route_path;  // as configured, e.g. "/assets/*"
  const Options& options;
  Logger& log;
  const DataSource& data;
  std::string_view agent_version;
};

using HandlerFactory = std::unique_ptr<Handler>(const HandlerContext&);

}  // namespace kiwi

// append_json_string and render_snapshot_json(const Snapshot&), after the types it renders.
#include "kiwi/json.hpp"

namespace kiwi {

// Appends `,"config":{...},"reload":{...}` (docs/api.md), shared by /api/health and /api/plugins.
inline void append_config_status_json(std::string& out, const ConfigStatus& c) {
  char buf[160];
  std::snprintf(buf, sizeof buf, ",\"config\":{\"generation\":%llu,\"loaded_at\":%.3f,\"source\":",
                static_cast<unsigned long long>(c.generation), c.loaded_at);
  out += buf;
  append_json_string(out, c.source);
  out += "},\"reload\":{\"status\":";
  append_json_string(out, c.reload_status);
  if (c.reload_at > 0) {
    std::snprintf(buf, sizeof buf, ",\"at\":%.3f", c.reload_at);
    out += buf;
  } else {
    out += ",\"at\":null";
  }
  out += ",\"message\":";
  if (c.reload_status == "failed")
    append_json_string(out, c.reload_message);
  else
    out += "null";
  out += ",\"ok_total\":" + std::to_string(c.reloads_ok) +
         ",\"failed_total\":" + std::to_string(c.reloads_failed) + "}";
}

inline Response Response::error(int status, std::string_view message, std::string_view parameter) {
  std::string body = "{\"error\":{\"status\":" + std::to_string(status);
  if (!parameter.empty()) {
    body += ",\"parameter\":";
    append_json_string(body, parameter);
  }
  body += ",\"message\":";
  append_json_string(body, message);
  body += "}}";
  Response r;
  r.status = status;
  r.body = std::make_shared<const std::string>(std::move(body));
  return r;
}

}  // namespace kiwi

// Declares a handler plugin. Use once, in one source file of the plugin:
//   KIWI_HANDLER_PLUGIN(HistoryHandler, "history", "columnar sample history", kOptions)
// CLASS must be constructible from (const kiwi::HandlerContext&).
#define KIWI_HANDLER_PLUGIN(CLASS, NAME, DESCRIPTION, OPTIONS)                                     \
  namespace kiwi_plugin_detail {                                                                   \
  const ::kiwi::PluginInfo info{::kiwi::PluginKind::handler, NAME, DESCRIPTION,                    \
                                std::span<const ::kiwi::OptionSpec>(OPTIONS), ::kiwi::no_metrics}; \
  std::unique_ptr<::kiwi::Handler> create(const ::kiwi::HandlerContext& ctx) {                     \
    return std::make_unique<CLASS>(ctx);                                                           \
  }                                                                                                \
  }                                                                                                \
  KIWI_DETAIL_EXPORT_COMMON(kiwi_plugin_detail::info)                                              \
  BOOST_DLL_ALIAS(kiwi_plugin_detail::create, kiwi_create)
