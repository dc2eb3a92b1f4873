#include "http_server.hpp"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <vector>

namespace kiwi::agent {

namespace {

// Per-request state between MHD's calls. Requests without a body (all GET/HEAD in practice) use
// the shared marker and allocate nothing; a body allocates a RequestBody.
char first_call_marker;

struct RequestBody {
  std::string data;
  bool too_large = false;
};

MHD_Result collect(void* cls, MHD_ValueKind, const char* key, const char* value) {
  auto* out = static_cast<std::vector<Param>*>(cls);
  out->push_back({key ? key : "", value ? value : ""});
  return MHD_YES;
}

void free_body(void* cls) {
  delete static_cast<Body*>(cls);
}

MHD_Response* build_response(const Body& chosen, const Response& r, bool gzip) {
  static const std::string empty;
  const std::string& data = chosen ? *chosen : empty;
  // Zero-copy: MHD reads the shared body in place; the callback drops our reference when done.
  auto* keep = new Body(chosen);
  MHD_Response* res = MHD_create_response_from_buffer_with_free_callback_cls(
      data.size(), const_cast<char*>(data.data()), &free_body, keep);
  if (!res) {
    delete keep;
    return nullptr;
  }
  if (!r.content_type.empty()) MHD_add_response_header(res, "Content-Type", r.content_type.c_str());
  if (r.body_gzip) {
    MHD_add_response_header(res, "Vary", "Accept-Encoding");
    if (gzip) MHD_add_response_header(res, "Content-Encoding", "gzip");
  }
  for (auto& h : r.headers) MHD_add_response_header(res, h.name.c_str(), h.value.c_str());
  return res;
}

// The MHD response a worker made last, reused while its answers stay the same: the same body
// object (the cached page, snapshot, history window or /metrics text of the current second), type
// and headers. MHD counts the references to a response, so one object may be queued on many
// connections at once (the ceiling server serves every request so). Building one costs some 15
// allocations (the response, each header's name and value); reusing it costs a few comparisons.
// The cached response keeps its body alive, so a body's address cannot be reused while cached.
struct LastResponse {
  MHD_Response* response = nullptr;
  const std::string* body = nullptr;
  bool has_gzip = false;
  bool gzip = false;
  std::string content_type;
  std::vector<Header> headers;

  bool matches(const std::string* b, const Response& r, bool gz) const {
    if (!response || b != body || (r.body_gzip != nullptr) != has_gzip || gz != gzip ||
        r.content_type != content_type || r.headers.size() != headers.size())
      return false;
    for (std::size_t i = 0; i < headers.size(); ++i)
      if (r.headers[i].name != headers[i].name || r.headers[i].value != headers[i].value)
        return false;
    return true;
  }
  ~LastResponse() {
    if (response) MHD_destroy_response(response);
  }
};

// The response for `r`, owned by the calling worker's cache: queue it, do not destroy it.
MHD_Response* make_response(const Response& r, bool gzip) {
  thread_local LastResponse last;
  const Body& chosen = gzip && r.body_gzip ? r.body_gzip : r.body;
  if (last.matches(chosen.get(), r, gzip)) return last.response;
  MHD_Response* res = build_response(chosen, r, gzip);
  if (!res) return nullptr;
  if (last.response) MHD_destroy_response(last.response);  // freed once no connection uses it
  last.response = res;
  last.body = chosen.get();
  last.has_gzip = r.body_gzip != nullptr;
  last.gzip = gzip;
  last.content_type = r.content_type;
  last.headers = r.headers;
  return res;
}

std::string client_address(MHD_Connection* c) {
  const MHD_ConnectionInfo* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (!info || !info->client_addr) return {};
  char buf[INET6_ADDRSTRLEN] = {};
  const sockaddr* sa = info->client_addr;
  if (sa->sa_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  else if (sa->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  return buf;
}

// CORS is off unless [http] cors_origins lists the exact origin; there is no wildcard.
bool origin_allowed(const HttpSettings& s, const Request& req) {
  auto origin = req.header("Origin");
  if (!origin) return false;
  for (auto& o : s.cors_origins)
    if (o == *origin) return true;
  return false;
}

void add_cors_headers(const HttpSettings& s, const Request& req, Response& res) {
  if (s.cors_origins.empty()) return;
  res.headers.push_back({"Vary", "Origin"});
  if (origin_allowed(s, req))
    res.headers.push_back({"Access-Control-Allow-Origin", std::string(*req.header("Origin"))});
}

// A browser's preflight (OPTIONS with Access-Control-Request-Method) from an allowed origin: 204.
std::optional<Response> cors_preflight(const HttpSettings& s, const Request& req) {
  if (req.method != "OPTIONS" || !req.header("Access-Control-Request-Method") ||
      !origin_allowed(s, req))
    return std::nullopt;
  Response res;
  res.status = 204;
  res.content_type.clear();
  res.headers = {{"Access-Control-Allow-Methods", "GET, HEAD"},
                 {"Access-Control-Allow-Headers", "If-None-Match, Accept-Encoding"},
                 {"Access-Control-Max-Age", "600"}};
  return res;
}

// Conditional GET and HEAD for every route (RFC 9110 section 13.1.2): a 200 whose ETag the
// client's If-None-Match names becomes a 304 with the same validator and caching headers and no
// body. Handlers only set the ETag.
void not_modified_if_matching(const Request& req, Response& res) {
  if (res.status != 200 || (req.method != "GET" && req.method != "HEAD")) return;
  auto inm = req.header("If-None-Match");
  if (!inm) return;
  for (auto& h : res.headers)
    if (h.name == "ETag" && etag_matches(*inm, h.value)) {
      res.status = 304;
      res.content_type.clear();
      res.body.reset();
      if (res.body_gzip) res.headers.push_back({"Vary", "Accept-Encoding"});  // as the 200 has
      res.body_gzip.reset();
      return;
    }
}

MHD_Result on_request(void* cls, MHD_Connection* c, const char* url, const char* method,
                      const char*, const char* upload_data, size_t* upload_size, void** state) {
  auto* ctx = static_cast<HttpServer::Context*>(cls);
  // First call: headers only. Answering now would count as an early response in MHD 0.9.75 and
  // close kept-alive connections, so answer on a later call.
  if (*state == nullptr) {
    *state = &first_call_marker;
    return MHD_YES;
  }
  if (*upload_size != 0) {
    if (*state == &first_call_marker) *state = new RequestBody;
    auto* body = static_cast<RequestBody*>(*state);
    if (body->data.size() + *upload_size > kMaxBodyBytes)
      body->too_large = true;
    else
      body->data.append(upload_data, *upload_size);
    *upload_size = 0;
    return MHD_YES;
  }
  auto* body = *state == &first_call_marker ? nullptr : static_cast<RequestBody*>(*state);

  thread_local std::vector<Param> query, headers;
  query.clear();
  headers.clear();
  MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, &collect, &query);
  MHD_get_connection_values(c, MHD_HEADER_KIND, &collect, &headers);
  std::string remote = client_address(c);

  Request req;
  req.method = method;
  req.path = url;
  req.query = query;
  req.headers = headers;
  req.remote_address = remote;
  if (body) req.body = body->data;

  std::size_t header_bytes = 0;
  for (auto& h : headers) header_bytes += h.name.size() + h.value.size() + 4;
  std::size_t uri_bytes = std::strlen(url);
  for (auto& q : query) uri_bytes += q.name.size() + q.value.size() + 2;

  int route = -1;
  Response res;
  if (uri_bytes > kMaxUriBytes)
    res =
        Response::error(414, "request URI longer than " + std::to_string(kMaxUriBytes) + " bytes");
  else if (header_bytes > kMaxHeaderBytes)
    res = Response::error(
        431, "request headers larger than " + std::to_string(kMaxHeaderBytes) + " bytes");
  else if (body && body->too_large)
    res = Response::error(413,
                          "request body larger than " + std::to_string(kMaxBodyBytes) + " bytes");
  else if (auto preflight = cors_preflight(*ctx->settings, req))
    res = std::move(*preflight);
  else
    res = ctx->router->dispatch(req, &route);
  not_modified_if_matching(req, res);
  add_cors_headers(*ctx->settings, req, res);
  ctx->counters.add(route, res.status);

  MHD_Response* response = make_response(res, req.accepts_gzip());
  if (!response) return MHD_NO;
  return MHD_queue_response(c, static_cast<unsigned>(res.status), response);
}

void on_completed(void*, MHD_Connection*, void** state, MHD_RequestTerminationCode) {
  if (*state && *state != &first_call_marker) delete static_cast<RequestBody*>(*state);
  *state = nullptr;
}

void on_mhd_log(void* cls, const char* fmt, va_list ap) {
  char buf[512];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  std::string_view msg(buf);
  while (!msg.empty() && msg.back() == '\n') msg.remove_suffix(1);
  static_cast<Logger*>(cls)->debug(std::string("http: ") + std::string(msg));
}

}  // namespace

int auto_worker_threads() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  return std::clamp(cpus, 1, kMaxAutoThreads);
}

std::string http_library_version() {
  return std::string("libmicrohttpd ") + MHD_get_version() +
         (MHD_is_feature_supported(MHD_FEATURE_TLS) == MHD_YES ? " (with TLS support, unused)"
                                                               : " (without TLS)");
}

HttpServer::HttpServer(HttpSettings settings, const Router& router, Logger& log)
    : settings_(std::move(settings)),
      context_{&router, &log, &settings_, RequestCounters(router.routes().size())} {
  if (settings_.threads <= 0) settings_.threads = auto_worker_threads();
}

void RequestCounters::add(int route_index, int status) {
  std::size_t col = kStatuses.size() - 1;
  for (std::size_t i = 0; i + 1 < kStatuses.size(); ++i)
    if (kStatuses[i] == status) col = i;
  counts_[static_cast<std::size_t>(route_index + 1)][col].fetch_add(1, std::memory_order_relaxed);
}

std::vector<HttpRequestCount> RequestCounters::snapshot(const std::vector<Route>& routes) const {
  std::vector<HttpRequestCount> out;
  for (std::size_t r = 0; r < counts_.size(); ++r)
    for (std::size_t i = 0; i < kStatuses.size(); ++i)
      if (auto n = counts_[r][i].load(std::memory_order_relaxed))
        out.push_back({r == 0 ? "unmatched" : routes[r - 1].path, kStatuses[i], n});
  return out;
}

HttpServer::~HttpServer() {
  stop();
}

namespace {

// What to do about a bind() or listen() failure, by errno.
std::string bind_advice(int err, const BindAddress& b) {
  switch (err) {
    case EADDRINUSE:
      return "another process is using the port; stop it or choose another port in [http] bind";
    case EADDRNOTAVAIL:
      return b.host +
             " is not an address of this machine; use one of its addresses, 127.0.0.1 (this "
             "machine only) or 0.0.0.0 (every interface) in [http] bind";
    case EACCES:
      return "ports below 1024 need root or CAP_NET_BIND_SERVICE; use a port from 1024 up in "
             "[http] bind";
    case EAFNOSUPPORT:
      return "this machine has no IPv6; use an IPv4 address in [http] bind";
    default:
      return "see [http] bind";
  }
}

// The listening socket, opened here rather than by MHD so that a failure names its real cause
// (MHD's own errno does not survive its clean-up). Throws std::runtime_error.
int open_listener(const BindAddress& b) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  if (b.ipv6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(b.port);
    inet_pton(AF_INET6, b.host.c_str(), &a->sin6_addr);
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    a->sin_family = AF_INET;
    a->sin_port = htons(b.port);
    inet_pton(AF_INET, b.host.c_str(), &a->sin_addr);
    len = sizeof *a;
  }
  int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  auto fail = [&](const char* what) -> int {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot listen on " + b.str() + ": " + what + ": " +
                             std::strerror(err) + " (" + bind_advice(err, b) + ")");
  };
  if (fd < 0) return fail("socket");
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (b.ipv6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) return fail("bind");
  if (::listen(fd, SOMAXCONN) != 0) return fail("listen");
  return fd;
}

}  // namespace

void HttpServer::start() {
  const auto& b = settings_.bind;
  const int listener = open_listener(b);
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
  if (b.ipv6) flags |= MHD_USE_IPv6;
  const auto timeout_s = static_cast<unsigned>(settings_.keep_alive.count() / 1000);
  // Per-connection memory: it holds the request's header block (we answer 431 with JSON past
  // kMaxHeaderBytes, so it must fit that and the read buffer) and the response headers; 32
  // connections of a busy client hold 32 of these. Above 32 KiB MHD would mmap/munmap every
  // connection's pool: measured as most of the idle CPU of a client that polls with curl.
  daemon_ = MHD_start_daemon(
      flags, 0, nullptr, nullptr, &on_request, &context_, MHD_OPTION_LISTEN_SOCKET, listener,
      MHD_OPTION_CONNECTION_TIMEOUT, timeout_s, MHD_OPTION_CONNECTION_LIMIT,
      static_cast<unsigned>(settings_.max_connections), MHD_OPTION_NOTIFY_COMPLETED, &on_completed,
      nullptr, MHD_OPTION_EXTERNAL_LOGGER, &on_mhd_log, context_.log,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, kConnectionMemoryBytes,
      // One worker is MHD's own polling thread: a pool of 1 draws a warning, so the list ends here.
      settings_.threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END,
      static_cast<unsigned>(settings_.threads), MHD_OPTION_END);
  if (!daemon_) {
    const int err = errno;
    ::close(listener);
    throw std::runtime_error("cannot start the HTTP server on " + b.str() + ": " +
                             std::strerror(err));
  }
}

void HttpServer::stop() {
  if (daemon_) MHD_stop_daemon(daemon_);
  daemon_ = nullptr;
}

std::uint16_t HttpServer::port() const {
  if (!daemon_) return 0;
  const MHD_DaemonInfo* info = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
  return info ? info->port : 0;
}

}  // namespace kiwi::agent
