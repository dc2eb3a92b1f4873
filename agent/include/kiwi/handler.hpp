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
//   - KIWI_HANDLER_PLUGIN makes the class a plugin through the C ABI (kiwi/plugin.h, kiwi/abi.hpp):
//     the agent sees C functions and views, never these classes. The glue (kiwi/handler_abi.hpp,
//     included at the end of this file) turns the C request into a kiwi::Request, the Response
//     into C calls, and the agent's C views of its data (kiwi/views.hpp) into the DataSource
//     below.
#pragma once

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiwi/json.hpp"
#include "kiwi/model.hpp"
#include "kiwi/plugin.hpp"

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
  // Who [http.auth] let in (ABI 1.4): "Basic" or "Bearer", and the Basic user name ("" for a
  // bearer token, which names no user). Both "" when the request was not authenticated (no
  // [http.auth], a public path, or an agent older than 1.4).
  std::string_view auth_type;
  std::string_view remote_user;

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
// A response body produced as it goes (ABI 1.4, kiwi_stream in kiwi/plugin.h): a program's output,
// sent to the client as it comes, with the server's memory bounded by its buffers, uncompressed.
// The server calls read() until it returns `end` or `error`, never two calls at once (from any
// worker thread), and destroys the stream when it is done with it, which may come before the end
// (the client went away, a HEAD or 304 answer, the server stops): the destructor then stops
// whatever produces it. Every stream is destroyed before the handler that made it.
class Stream {
 public:
  static constexpr std::ptrdiff_t end = -1;    // the body is complete
  static constexpr std::ptrdiff_t error = -2;  // it cannot be completed: sent cut short
  // What a read() that has nothing yet waits for: `fd` readable, or `until`; at least one set.
  struct Wait {
    int fd = -1;
    std::chrono::steady_clock::time_point until = std::chrono::steady_clock::time_point::max();
  };
  virtual ~Stream() = default;
  // Never blocks: the bytes copied to `buffer` (> 0, at most `capacity`), or 0 with `wait` set
  // (the server calls again when it comes, and serves its other clients meanwhile), or end, or
  // error (the handler has logged why).
  virtual std::ptrdiff_t read(char* buffer, std::size_t capacity, Wait& wait) = 0;
};

// The whole of `stream`, waiting (poll) where it says: for tests, and for an agent older than ABI
// 1.4, which takes no stream. Throws std::runtime_error on Stream::error.
inline std::string read_all(Stream& stream) {
  std::string out;
  char buf[65536];
  for (;;) {
    Stream::Wait wait;
    const std::ptrdiff_t n = stream.read(buf, sizeof buf, wait);
    if (n > 0) {
      out.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n == Stream::end) return out;
    if (n != 0) throw std::runtime_error("the response body was cut short");
    int timeout = -1;
    if (wait.until != std::chrono::steady_clock::time_point::max()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(
          wait.until - std::chrono::steady_clock::now());
      timeout = static_cast<int>(std::clamp<long long>(left.count(), 0, INT_MAX));
    }
    pollfd p{wait.fd, POLLIN, 0};
    if (::poll(&p, wait.fd >= 0 ? 1 : 0, timeout) < 0 && errno != EINTR)
      throw std::runtime_error("poll failed while reading a response body");
  }
}

// Sets `to` to `text`, reusing its storage; one that already holds it is not written (the usual
// case for a Response reused from request to request: see Handler::handle_into).
inline void assign_text(std::string& to, std::string_view text) {
  if (std::string_view(to) != text) to.assign(text);
}

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
  // Set: the body, produced as it goes (ABI 1.4; `body` is not sent then).
  std::shared_ptr<Stream> stream;

  // A JSON error body in the API's one error shape:
  //   {"error":{"status":400,"parameter":"limit","message":"..."}}  ("parameter" only if given)
  static Response error(int status, std::string_view message, std::string_view parameter = {});

  // Sets every field, reusing the storage of the strings and header rows already here (what a
  // Handler::handle_into does to the Response it is handed; see there).
  void set(int new_status, std::string_view type,
           std::initializer_list<std::pair<std::string_view, std::string_view>> new_headers,
           Body new_body) {
    status = new_status;
    assign_text(content_type, type);
    headers.resize(new_headers.size());
    auto row = headers.begin();
    for (const auto& [name, value] : new_headers) {
      assign_text(row->name, name);
      assign_text(row->value, value);
      ++row;
    }
    body = std::move(new_body);
    stream.reset();
  }
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
  // Every alert instance that is not inactive (pending, firing, resolved), firing first, then
  // by name and labels. An agent before ABI 1.6: none.
  virtual std::vector<Alert> alerts() const { return {}; }

 protected:
  ~DataSource() = default;
};

class Handler {
 public:
  virtual ~Handler() = default;
  virtual Response handle(const Request& request) = 0;
  // What is called for each request: answers into `out`, a Response reused from request to
  // request (it holds an earlier answer), so that its strings and header rows keep their storage.
  // The default assigns handle()'s answer. A handler that answers a busy route may override it
  // to set every field of `out` in place (Response::set), and saves the allocations of a new
  // Response per request; its handle() then answers through it.
  virtual void handle_into(const Request& request, Response& out) { out = handle(request); }
  // The methods handle() takes, as the Allow header lists them. The router answers any other
  // method with 405 and this list, comparing whole, case-sensitive tokens (RFC 9110 section 9.1).
  virtual std::string_view methods() const { return "GET, HEAD"; }
};

// A Handler that answers in place: it implements handle_into only, and handle() answers
// through it.
class InPlaceHandler : public Handler {
 public:
  Response handle(const Request& request) final {
    Response out;
    handle_into(request, out);
    return out;
  }
  void handle_into(const Request& request, Response& out) override = 0;
};

// A [[peer]]: another agent whose board a fleet view shows (ABI 1.8, docs/fleet.md). Credentials
// are files, read by the handler that fetches (in its constructor, so a reload reads them again).
struct Peer {
  std::string_view name;  // unique among the peers
  std::string_view url;   // http:// or https://, no trailing '/'
  std::chrono::milliseconds timeout{2000};
  std::string_view bearer_token_file;  // "" none
  std::string_view username;           // Basic authentication ("" none)
  std::string_view password_file;
  std::string_view ca_file;  // https: the CAs to trust ("" the system's)
};

// Handed to the factory; valid only during the factory call, except `data` and `log`, which
// outlive the handler.
struct HandlerContext {
  std::string_view route_path;  // as configured, e.g. "/assets/*"
  const Options& options;
  Logger& log;
  const DataSource& data;
  std::string_view agent_version;
  // ABI 1.8: this board's name (gethostname) and the [[peer]] entries, in config order (an agent
  // before 1.8: "" and none).
  std::string_view host_name = {};
  std::span<const Peer> peers = {};
};

using HandlerFactory = std::unique_ptr<Handler>(const HandlerContext&);

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

// The C ABI glue behind KIWI_HANDLER_PLUGIN, which a handler does not call.
#include "kiwi/handler_abi.hpp"
