#include "http/gates.hpp"

#include <strings.h>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <optional>
#include <string>
#include <utility>

#include "http/http_server.hpp"
#include "http/response_cache.hpp"

namespace kiwi::agent::http {

namespace {

// What the list costs a request, by tools/bench/run.sh --instructions (a worker's instructions per
// request, about 33,000 in all): the chain of ifs it replaced, plus about 230 when answer_request()
// looped through the table's function pointers, plus about 50 as it is: each gate called directly
// (run_gates() below), and a gate's refusal built in a function of its own, off the path of a
// request that passes, so that the checks stay small enough to inline.

// --- Request limits: a JSON error before any handler runs --------------------------------------

[[gnu::cold, gnu::noinline]] bool refuse_size(Response& out, int status, const char* what,
                                              std::size_t limit) {
  out = Response::error(status, what + std::to_string(limit) + " bytes");
  return true;
}

bool uri_too_long(const GateInput& in, Response& out) {
  std::size_t bytes = in.request.path.size();
  for (auto& q : in.request.query) bytes += q.name.size() + q.value.size() + 2;
  return bytes > kMaxUriBytes && refuse_size(out, 414, "request URI longer than ", kMaxUriBytes);
}

bool headers_too_large(const GateInput& in, Response& out) {
  std::size_t bytes = 0;
  for (auto& h : in.request.headers) bytes += h.name.size() + h.value.size() + 4;
  return bytes > kMaxHeaderBytes &&
         refuse_size(out, 431, "request headers larger than ", kMaxHeaderBytes);
}

[[gnu::cold, gnu::noinline]] bool refuse_content_length(Response& out) {
  out = Response::error(400, "conflicting Content-Length headers");
  out.headers.push_back({"Connection", "close"});  // where its body ends is unknown
  return true;
}

// Content-Length headers that disagree (RFC 9112 section 6.3: an unrecoverable framing error).
// libmicrohttpd 0.9.75 reads the body by the first and passes the rest on; a proxy in front that
// used another would see a different request (smuggling).
bool conflicting_content_length(const GateInput& in, Response& out) {
  const std::string_view* first = nullptr;
  for (const auto& h : in.request.headers) {
    if (h.name.size() != 14 || strncasecmp(h.name.data(), "Content-Length", 14) != 0) continue;
    if (first && *first != h.value) return refuse_content_length(out);
    first = &h.value;
  }
  return false;
}

[[gnu::cold, gnu::noinline]] bool refuse_bad_request(Response& out, const char* message) {
  out = Response::error(400, message);
  return true;
}

// Whether the raw (undecoded) path has `byte` percent-encoded ("%2F" or "%2f" for '/').
bool has_encoded(std::string_view raw, unsigned char byte) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (std::size_t i = raw.find('%'); i != std::string_view::npos; i = raw.find('%', i + 1))
    if (i + 2 < raw.size() &&
        std::toupper(static_cast<unsigned char>(raw[i + 1])) == kHex[byte >> 4] &&
        std::toupper(static_cast<unsigned char>(raw[i + 2])) == kHex[byte & 15])
      return true;
  return false;
}

// "%00" in the raw (undecoded) path. MHD decodes it into the path, which ends there for everyone
// reading it as a C string: "/cgi/a%00.txt" would be served as "/cgi/a". In the query it is only
// data.
bool encoded_nul(const GateInput& in, Response& out) {
  return has_encoded(in.raw_path, 0) &&
         refuse_bad_request(out, "request path contains an encoded NUL byte (%00)");
}

// A '.' or '..' segment in the decoded path, or an encoded '/' (%2F) in the raw one. Browsers and
// curl remove dot segments before they send (RFC 3986 section 5.2.4), so only a crafted request
// has them, and a handler that maps the path onto files (cgi's PATH_INFO, a program reading it)
// would be given a way out of its directory; %2F would let a segment carry a '/' past the
// router. Apache and lighttpd refuse both (Apache's AllowEncodedSlashes is off by default).
bool path_segments(const GateInput& in, Response& out) {
  const std::string_view path = in.request.path;
  for (std::size_t at = 0; at < path.size();) {
    const std::size_t end = std::min(path.find('/', at + 1), path.size());
    const std::string_view segment = path.substr(at + 1, end - at - 1);
    if (segment == "." || segment == "..")
      return refuse_bad_request(out, "request path has a '.' or '..' segment");
    at = end;
  }
  return has_encoded(in.raw_path, '/') &&
         refuse_bad_request(out, "request path contains an encoded '/' (%2F)");
}

// RFC 9110 section 7.2 and RFC 3986 section 3.2.2: Host = uri-host [ ":" port ], the host an
// IP-literal in brackets or a reg-name (letters, digits, "-._~", "%" escapes and the sub-delims
// "!$&'()*+,;="). A handler that writes the Host back (CGI's SERVER_NAME, a redirect) must not get
// markup or spaces in it. RFC 9112 section 3.2: more than one Host is a 400 too.
bool valid_host(std::string_view host) {
  if (!host.empty() && host.front() == '[') {
    const std::size_t close = host.find(']');
    if (close == std::string_view::npos) return false;
    for (char c : host.substr(1, close - 1))
      if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.') return false;
    host.remove_prefix(close + 1);
    if (host.empty()) return true;
    if (host.front() != ':') return false;
  } else {
    const std::size_t colon = host.find(':');
    for (char c : host.substr(0, colon))
      if (!std::isalnum(static_cast<unsigned char>(c)) &&
          std::string_view("-._~%!$&'()*+,;=").find(c) == std::string_view::npos)
        return false;
    if (colon == std::string_view::npos) return true;
    host.remove_prefix(colon);
  }
  for (char c : host.substr(1))
    if (c < '0' || c > '9') return false;
  return true;
}

bool bad_host(const GateInput& in, Response& out) {
  const std::string_view* host = nullptr;
  for (const auto& h : in.request.headers) {
    if (h.name.size() != 4 || strncasecmp(h.name.data(), "Host", 4) != 0) continue;
    if (host) return refuse_bad_request(out, "more than one Host header");
    host = &h.value;
  }
  return host && !valid_host(*host) &&
         refuse_bad_request(out,
                            "the Host header is not a host name or address with an optional port");
}

bool body_too_large(const GateInput& in, Response& out) {
  return in.body_too_large && refuse_size(out, 413, "request body larger than ", kMaxBodyBytes);
}

// --- CORS: off unless [http] cors_origins lists the exact origin; there is no wildcard ----------

bool origin_allowed(const std::vector<std::string>& cors_origins, const Request& req) {
  auto origin = req.header("Origin");
  if (!origin) return false;
  for (auto& o : cors_origins)
    if (o == *origin) return true;
  return false;
}

// A browser's preflight (OPTIONS with Access-Control-Request-Method) from an allowed origin: 204,
// with the methods the route's handler takes. A browser sends no credentials with it, so it comes
// before authentication.
[[gnu::noinline]] bool answer_preflight(const GateInput& in, Response& out) {
  const Request& req = in.request;
  if (!req.header("Access-Control-Request-Method") ||
      !origin_allowed(in.published.cors_origins, req))
    return false;
  Response res;
  res.status = 204;
  res.content_type.clear();
  res.headers = {
      {"Access-Control-Allow-Methods", std::string(in.published.router->methods(req.path))},
      {"Access-Control-Allow-Headers", "If-None-Match, Accept-Encoding, Content-Type"},
      {"Access-Control-Max-Age", "600"}};
  out = std::move(res);
  return true;
}

bool cors_preflight(const GateInput& in, Response& out) {
  return in.request.method == "OPTIONS" && answer_preflight(in, out);
}

[[gnu::noinline]] void add_cors_headers_to(const GateInput& in, Response& res) {
  res.headers.push_back({"Vary", "Origin"});
  if (origin_allowed(in.published.cors_origins, in.request))
    res.headers.push_back(
        {"Access-Control-Allow-Origin", std::string(*in.request.header("Origin"))});
}

void add_cors_headers(const GateInput& in, Response& res) {
  if (!in.published.cors_origins.empty()) add_cors_headers_to(in, res);
}

// --- [http.auth]: 401 with WWW-Authenticate, or 429 for a blocked address (auth.hpp) -----------

[[gnu::noinline]] bool check_credentials(const GateInput& in, Response& out) {
  Identity who;
  std::optional<Response> refused =
      in.published.auth->gate(in.request, in.auth_limiter, in.auth_counters, &who);
  if (!refused) {
    // Views into the Authenticator, which `in.published` holds until the request is answered.
    in.request.auth_type = who.auth_type;
    in.request.remote_user = who.user;
    return false;
  }
  out = std::move(*refused);
  return true;
}

bool authenticate(const GateInput& in, Response& out) {
  return in.published.auth && check_credentials(in, out);
}

// --- The route: 404, 405, then its handler (router.hpp) ---------------------------------------

bool no_route(const GateInput& in, Response& out) {
  return Router::answer_not_found(in.route, in.request.path, out);
}

bool method_not_allowed(const GateInput& in, Response& out) {
  return in.published.router->answer_method_not_allowed(in.route, in.request.method, out);
}

bool handler(const GateInput& in, Response& out) {
  in.published.router->handle(in.route, in.request, out);
  return true;
}

// Conditional GET and HEAD for every route (RFC 9110 section 13.1.2): a 200 whose ETag the
// client's If-None-Match names becomes a 304 with the same validator and caching headers and no
// body. Handlers only set the ETag.
void not_modified_if_matching(const GateInput& in, Response& res) {
  const Request& req = in.request;
  if (res.status != 200 || (req.method != "GET" && req.method != "HEAD")) return;
  auto inm = req.header("If-None-Match");
  if (!inm) return;
  for (auto& h : res.headers)
    if (h.name == "ETag" && etag_matches(*inm, h.value)) {
      if (negotiates_encoding(res)) res.headers.push_back({"Vary", "Accept-Encoding"});  // as 200
      res.status = 304;
      res.content_type.clear();
      res.body.reset();
      res.stream.reset();  // a streamed body is released unread
      return;
    }
}

// The lists, in order. A gate's row: its name, its function, and whether its answer counts as the
// route's in /metrics (else as "unmatched").
// clang-format off
constexpr RequestGate kRequestGates[] = {
    // name            answer                      route's  answers with
    {"uri-size",       uri_too_long,               false},  // 414
    {"header-size",    headers_too_large,          false},  // 431
    {"content-length", conflicting_content_length, false},  // 400, and closes the connection
    {"encoded-nul",    encoded_nul,                false},  // 400
    {"path-segments",  path_segments,              false},  // 400
    {"host",           bad_host,                   false},  // 400
    {"body-size",      body_too_large,             false},  // 413
    {"cors-preflight", cors_preflight,             false},  // 204
    {"auth",           authenticate,               true},   // 401, 429
    {"no-route",       no_route,                   false},  // 404
    {"method",         method_not_allowed,         true},   // 405 with Allow
    {"handler",        handler,                    true},   // the handler's answer; 500, 503
};

constexpr ResponseFilter kResponseFilters[] = {
    {"conditional-get", not_modified_if_matching},  // a 200 the client has: 304
    {"cors-headers",    add_cors_headers},          // Vary: Origin, Access-Control-Allow-Origin
};
// clang-format on

// Gate I of the list, called directly (its function is a constant, so the compiler may inline it):
// the list expanded at compile time, not a loop through function pointers (see the top).
template <std::size_t I>
bool try_gate(const GateInput& in, Response& out, int& route) {
  constexpr RequestGate gate = kRequestGates[I];
  if (!gate.answer(in, out)) return false;
  route = gate.counts_as_route ? in.route : -1;
  return true;
}

// The gates in order, up to the first that answers.
template <std::size_t... I>
void run_gates(const GateInput& in, Response& out, int& route, std::index_sequence<I...>) {
  (try_gate<I>(in, out, route) || ...);
}

template <std::size_t I>
void apply_filter(const GateInput& in, Response& res) {
  constexpr ResponseFilter filter = kResponseFilters[I];
  filter.apply(in, res);
}

template <std::size_t... I>
void run_filters(const GateInput& in, Response& res, std::index_sequence<I...>) {
  (apply_filter<I>(in, res), ...);
}

}  // namespace

std::span<const RequestGate> request_gates() {
  return kRequestGates;
}

std::span<const ResponseFilter> response_filters() {
  return kResponseFilters;
}

int answer_request(const GateInput& in, Response& out) {
  int route = -1;
  run_gates(in, out, route, std::make_index_sequence<std::size(kRequestGates)>());
  run_filters(in, out, std::make_index_sequence<std::size(kResponseFilters)>());
  return route;
}

}  // namespace kiwi::agent::http
