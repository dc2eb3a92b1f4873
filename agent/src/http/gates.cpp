#include "http/gates.hpp"

#include <strings.h>

#include <optional>
#include <utility>

#include "http/http_server.hpp"
#include "http/response_cache.hpp"

namespace kiwi::agent::http {

namespace {

// --- Request limits: a JSON error before any handler runs --------------------------------------

bool uri_too_long(const GateInput& in, Response& out) {
  std::size_t bytes = in.request.path.size();
  for (auto& q : in.request.query) bytes += q.name.size() + q.value.size() + 2;
  if (bytes <= kMaxUriBytes) return false;
  out = Response::error(414, "request URI longer than " + std::to_string(kMaxUriBytes) + " bytes");
  return true;
}

bool headers_too_large(const GateInput& in, Response& out) {
  std::size_t bytes = 0;
  for (auto& h : in.request.headers) bytes += h.name.size() + h.value.size() + 4;
  if (bytes <= kMaxHeaderBytes) return false;
  out = Response::error(
      431, "request headers larger than " + std::to_string(kMaxHeaderBytes) + " bytes");
  return true;
}

// Content-Length headers that disagree (RFC 9112 section 6.3: an unrecoverable framing error).
// libmicrohttpd 0.9.75 reads the body by the first and passes the rest on; a proxy in front that
// used another would see a different request (smuggling).
bool conflicting_content_length(const GateInput& in, Response& out) {
  const std::string_view* first = nullptr;
  for (const auto& h : in.request.headers) {
    if (h.name.size() != 14 || strncasecmp(h.name.data(), "Content-Length", 14) != 0) continue;
    if (first && *first != h.value) {
      out = Response::error(400, "conflicting Content-Length headers");
      out.headers.push_back({"Connection", "close"});  // where its body ends is unknown
      return true;
    }
    first = &h.value;
  }
  return false;
}

// "%00" in the raw (undecoded) path. MHD decodes it into the path, which ends there for everyone
// reading it as a C string: "/cgi/a%00.txt" would be served as "/cgi/a". In the query it is only
// data.
bool encoded_nul(const GateInput& in, Response& out) {
  const std::string_view raw = in.raw_path;
  for (std::size_t i = raw.find('%'); i != std::string_view::npos; i = raw.find('%', i + 1))
    if (i + 2 < raw.size() && raw[i + 1] == '0' && raw[i + 2] == '0') {
      out = Response::error(400, "request path contains an encoded NUL byte (%00)");
      return true;
    }
  return false;
}

bool body_too_large(const GateInput& in, Response& out) {
  if (!in.body_too_large) return false;
  out =
      Response::error(413, "request body larger than " + std::to_string(kMaxBodyBytes) + " bytes");
  return true;
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
bool cors_preflight(const GateInput& in, Response& out) {
  const Request& req = in.request;
  if (req.method != "OPTIONS" || !req.header("Access-Control-Request-Method") ||
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

void add_cors_headers(const GateInput& in, Response& res) {
  const auto& origins = in.published.cors_origins;
  if (origins.empty()) return;
  res.headers.push_back({"Vary", "Origin"});
  if (origin_allowed(origins, in.request))
    res.headers.push_back(
        {"Access-Control-Allow-Origin", std::string(*in.request.header("Origin"))});
}

// --- [http.auth]: 401 with WWW-Authenticate, or 429 for a blocked address (auth.hpp) -----------

bool authenticate(const GateInput& in, Response& out) {
  if (!in.published.auth) return false;
  std::optional<Response> refused =
      in.published.auth->gate(in.request, in.auth_limiter, in.auth_counters);
  if (!refused) return false;
  out = std::move(*refused);
  return true;
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

}  // namespace

std::span<const RequestGate> request_gates() {
  return kRequestGates;
}

std::span<const ResponseFilter> response_filters() {
  return kResponseFilters;
}

int answer_request(const GateInput& in, Response& out) {
  int route = -1;
  for (const RequestGate& gate : kRequestGates)
    if (gate.answer(in, out)) {
      route = gate.counts_as_route ? in.route : -1;
      break;
    }
  for (const ResponseFilter& filter : kResponseFilters) filter.apply(in, out);
  return route;
}

}  // namespace kiwi::agent::http
