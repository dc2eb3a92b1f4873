#include "http/http_server.hpp"

#include "base/compress.hpp"
#include "http/acceptor.hpp"
#include "http/gates.hpp"
#include "http/mhd_api.hpp"
#include "http/mhd_response.hpp"
#include "http/sockets.hpp"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sched.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace kiwi::agent {

namespace http {

// A worker of libmicrohttpd: an MHD daemon with no listening socket.
struct HttpWorker final : Worker {
  const MhdApi* api = nullptr;  // its daemon's library (HttpDaemon::api)
  MHD_Daemon* mhd = nullptr;

  ~HttpWorker() override { stop(); }
  bool add_connection(int fd, const sockaddr* addr, socklen_t len) override {
    return api->add_connection(mhd, fd, addr, len) == MHD_YES;
  }
  void stop() override {
    if (mhd) api->stop_daemon(mhd);
    mhd = nullptr;
  }
};

// What every set of workers shares with the server, which owns it and outlives them.
struct ServerShared {
  const std::atomic<std::shared_ptr<const Published>>* published = nullptr;
  Logger* log = nullptr;
  GzipCache* gzip = nullptr;  // shared by every set of workers
  AuthLimiter* auth_limiter = nullptr;
  AuthCounters* auth_counters = nullptr;
  SlotSignal* freed = nullptr;  // a worker tells the acceptor that a connection closed
};

// One set of workers with its settings and what is in flight on it; on_request gets it as its
// closure. It owns no socket: the Acceptor hands it connections. A set that a reconfigure()
// replaced drains on its own thread (`retirer`).
struct HttpDaemon : WorkerSet {
  ServerShared shared;
  HttpSettings settings;  // cors_origins unused: requests read them from `published`
  // The libmicrohttpd of this set: the linked one, or the TLS one for [http.tls]. Everything of
  // the set (daemons, connections, responses) is made and handled by it alone.
  const MhdApi* api = &linked_mhd();
  std::atomic<bool> draining{false};  // replaced: answer with "Connection: close"
  std::atomic<int> in_flight{0};      // requests between their first and completion callbacks
  std::atomic<bool> hurry{false};     // stop(): wait for requests in flight only, not connections
  std::atomic<bool> done{false};      // the retirer has stopped it
  std::thread retirer;

  HttpDaemon() = default;
  HttpDaemon(const HttpDaemon&) = delete;
  HttpDaemon& operator=(const HttpDaemon&) = delete;
  ~HttpDaemon() {
    if (retirer.joinable()) {
      hurry.store(true);
      retirer.join();
    }
    shut_down();
  }
};

}  // namespace http

namespace {

using http::answer_request;
using http::ConnectionSlot;
using http::ensure_descriptors;
using http::GateInput;
using http::HttpDaemon;
using http::HttpWorker;
using http::make_response;
using http::Published;
using http::ServerShared;

// Per-request state between MHD's calls, from the request line (on_uri) to on_completed. A request
// whose target has no '%' and no '?' and that has no body (nearly every GET/HEAD) uses the shared
// markers and allocates nothing; any other allocates a RequestState.
char uri_marker;         // the request line was read; on_request has not run yet
char first_call_marker;  // on_request has run: the request is in flight

struct RequestState {
  // The request-target as sent, kept when MHD's decoding changes it (a '%' or a '?' in it): MHD
  // decodes the path and the query in place after on_uri, and CGI wants the raw query.
  std::string target;
  std::string data;  // the body
  bool too_large = false;
  bool started = false;  // on_request has run
};

// The connection's entry in its worker's list (set at NOTIFY_STARTED), or null.
ConnectionSlot* slot_of(const MhdApi& mhd, MHD_Connection* c) {
  const MHD_ConnectionInfo* info = mhd.get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return info ? static_cast<ConnectionSlot*>(info->socket_context) : nullptr;
}

RequestState* state_of(void* state) {
  return state == nullptr || state == &uri_marker || state == &first_call_marker
             ? nullptr
             : static_cast<RequestState*>(state);
}

// MHD_OPTION_URI_LOG_CALLBACK: the request-target before MHD decodes it; the value returned is the
// request's first *state.
void* on_uri(void*, const char* uri, MHD_Connection*) {
  if (!std::strpbrk(uri, "%?")) return &uri_marker;
  auto* st = new RequestState;
  st->target = uri;
  return st;
}

MHD_Result collect(void* cls, MHD_ValueKind, const char* key, const char* value) {
  auto* out = static_cast<std::vector<Param>*>(cls);
  out->push_back({key ? key : "", value ? value : ""});
  return MHD_YES;
}

// The connection's client address ("192.0.2.7", "::1"); "" if unknown.
std::string client_address(const MhdApi& mhd, MHD_Connection* c) {
  const MHD_ConnectionInfo* info = mhd.get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  return info ? http::address_text(info->client_addr) : std::string();
}

// The address and port the connection came in on ("127.0.0.1", "::1"); {"", 0} if unknown.
std::pair<std::string, std::uint16_t> local_address(const MhdApi& mhd, MHD_Connection* c) {
  const MHD_ConnectionInfo* info = mhd.get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (!info) return {};
  return http::local_address_of(info->connect_fd);
}

MHD_Result on_request(void* cls, MHD_Connection* c, const char* url, const char* method,
                      const char* version, const char* upload_data, size_t* upload_size,
                      void** state) {
  auto* daemon = static_cast<HttpDaemon*>(cls);
  const MhdApi& mhd = *daemon->api;
  // First call: headers only. Answering now would count as an early response in MHD 0.9.75 and
  // close kept-alive connections, so answer on a later call. From here to on_completed the
  // request is in flight: a replaced daemon is not stopped under it.
  RequestState* st = state_of(*state);
  if (*state == nullptr || *state == &uri_marker || (st && !st->started)) {
    if (st)
      st->started = true;
    else
      *state = &first_call_marker;
    if (ConnectionSlot* slot = slot_of(mhd, c)) slot->request_started();
    daemon->in_flight.fetch_add(1, std::memory_order_relaxed);
    return MHD_YES;
  }
  if (*upload_size != 0) {
    if (!st) {
      *state = st = new RequestState;
      st->started = true;
    }
    if (st->data.size() + *upload_size > kMaxBodyBytes)
      st->too_large = true;
    else
      st->data.append(upload_data, *upload_size);
    *upload_size = 0;
    return MHD_YES;
  }

  thread_local std::vector<Param> query, headers;
  query.clear();
  headers.clear();
  mhd.get_connection_values(c, MHD_GET_ARGUMENT_KIND, &collect, &query);
  mhd.get_connection_values(c, MHD_HEADER_KIND, &collect, &headers);
  // The connection's addresses (its slot outlives the request); without a slot, looked up now.
  const ConnectionSlot* slot = slot_of(mhd, c);
  std::string remote, local;
  std::uint16_t local_port = 0;
  if (!slot) {
    remote = client_address(mhd, c);
    std::tie(local, local_port) = local_address(mhd, c);
  }

  Request req;
  req.method = method;
  req.path = url;
  req.query = query;
  req.headers = headers;
  req.remote_address = slot ? std::string_view(slot->remote_address) : remote;
  req.protocol = version ? version : "";
  req.local_address = slot ? std::string_view(slot->local_address) : local;
  req.local_port = slot ? slot->local_port : local_port;
  std::string_view raw_path = req.path;
  if (st) {
    req.body = st->data;
    const std::string_view target = st->target;
    const std::size_t q = target.find('?');
    raw_path = target.substr(0, q);
    if (q != std::string_view::npos) req.raw_query = target.substr(q + 1);
  }

  // The routes, CORS origins and authentication of this request, whole: reconfigure() swaps them
  // together. The reference keeps the router and its handlers alive until the request is answered.
  const std::shared_ptr<const Published> published =
      daemon->shared.published->load(std::memory_order_acquire);
  const Router& router = *published->router;
  const GateInput in{req,
                     raw_path,
                     st && st->too_large,
                     *published,
                     router.route_of(req.path),
                     *daemon->shared.auth_limiter,
                     *daemon->shared.auth_counters};
  // The worker's response of its last request, reused (see answer_request). It keeps that body
  // until the next request, as LastResponse does.
  thread_local Response res;
  const int route = answer_request(in, res);
  router.count(route, res.status);

  const std::shared_ptr<LoadedLibrary>* code =
      route >= 0 ? &router.routes()[static_cast<std::size_t>(route)].handler->library : nullptr;
  MHD_Response* response =
      make_response(mhd, res, req.accepts_gzip(), daemon->draining.load(std::memory_order_relaxed),
                    *daemon->shared.gzip, code);
  if (!response) return MHD_NO;
  return mhd.queue_response(c, static_cast<unsigned>(res.status), response);
}

// Once per request whose first callback ran (MHD 0.9.75 calls it only for those).
// Since on_uri is set, MHD calls it for every request whose request line it read, also those it
// answered (or dropped) before on_request ran: those were never in flight.
void on_completed(void* cls, MHD_Connection* c, void** state, MHD_RequestTerminationCode) {
  bool started = *state == &first_call_marker;
  if (RequestState* st = state_of(*state)) {
    started = st->started;
    delete st;
  }
  *state = nullptr;
  auto* daemon = static_cast<HttpDaemon*>(cls);
  if (ConnectionSlot* slot = slot_of(*daemon->api, c)) slot->request_done();
  if (started) daemon->in_flight.fetch_sub(1, std::memory_order_release);
}

// Keeps each worker's list of its connections (HttpWorker), the slot in MHD's socket context.
void on_connection(void* cls, MHD_Connection* c, void** context,
                   MHD_ConnectionNotificationCode code) {
  auto* w = static_cast<HttpWorker*>(cls);
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    const MHD_ConnectionInfo* info =
        w->api->get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    auto [local, local_port] = local_address(*w->api, c);
    *context = &w->connection_started(info ? info->connect_fd : -1, client_address(*w->api, c),
                                      std::move(local), local_port);
    return;
  }
  if (code == MHD_CONNECTION_NOTIFY_CLOSED)
    w->connection_closed(static_cast<ConnectionSlot*>(std::exchange(*context, nullptr)));
}

// What libmicrohttpd logged on this thread since it was cleared: MHD_start_daemon() says why it
// failed (GnuTLS's reason for refusing a key, say) only there.
thread_local std::string mhd_messages;

void on_mhd_log(void* cls, const char* fmt, va_list ap) {
  char buf[512];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  std::string_view msg(buf);
  while (!msg.empty() && msg.back() == '\n') msg.remove_suffix(1);
  if (mhd_messages.size() < 1024) (mhd_messages += mhd_messages.empty() ? "" : " ") += msg;
  static_cast<Logger*>(cls)->debug(std::string("http: ") + std::string(msg));
}

// Starts a set of s.threads workers for `s`, on the linked libmicrohttpd or, for [http.tls], the
// TLS one (loaded on its first use). Throws std::runtime_error naming the address (and for TLS,
// the files and GnuTLS's reason).
std::unique_ptr<HttpDaemon> start_daemon(const HttpSettings& s, const ServerShared& shared) {
  auto d = std::make_unique<HttpDaemon>();
  d->shared = shared;
  d->settings = s;
  // [http.tls]: the TLS build of libmicrohttpd (loaded now if this is its first use), given the
  // PEM text read with the config; MHD reads it while it starts each worker. A reload that
  // changes either file's content (a renewed certificate) starts a new set of workers, like a
  // change of threads.
  d->api = s.tls.enabled() ? &tls_mhd() : &linked_mhd();
  const bool tls = s.tls.enabled();
  const MHD_OptionItem tls_options[] = {
      {tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0,
       const_cast<char*>(d->settings.tls.cert_pem.c_str())},
      {MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char*>(d->settings.tls.key_pem.c_str())},
      {MHD_OPTION_END, 0, nullptr}};
  // No listening socket: the Acceptor hands connections over. MHD_USE_ITC wakes the worker a
  // connection is added to (MHD would add it for MHD_USE_NO_LISTEN_SOCKET anyway).
  const unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
                         MHD_USE_ITC | MHD_USE_NO_LISTEN_SOCKET | (tls ? MHD_USE_TLS : 0);
  const auto timeout_s = static_cast<unsigned>(s.keep_alive.count() / 1000);
  const auto threads = static_cast<std::uint64_t>(s.threads);
  const auto max_connections = static_cast<std::uint64_t>(s.max_connections);
  ensure_descriptors(max_connections, *shared.log);
  for (std::uint64_t i = 0; i < threads; ++i) {
    auto worker = std::make_unique<HttpWorker>();
    auto& w = *worker;
    d->workers.push_back(std::move(worker));
    w.api = d->api;
    w.freed = shared.freed;
    // max_connections split as evenly as it goes; a worker whose share is 0 gets nothing. MHD's
    // own limit is kEvictHeadroom + 1 more: connections evicted but not yet closed, and one the
    // acceptor counts closed a moment before MHD does (between NOTIFY_CLOSED and MHD's count);
    // the limit is the acceptor's.
    w.limit = max_connections / threads + (i < max_connections % threads ? 1 : 0);
    // Per-connection memory: it holds the request's header block (we answer 431 with JSON past
    // kMaxHeaderBytes, so it must fit that and the read buffer) and the response headers; 32
    // connections of a busy client hold 32 of these. Above 32 KiB MHD would mmap/munmap every
    // connection's pool: measured as most of the idle CPU of a client that polls with curl.
    mhd_messages.clear();
    // The logger first: MHD reports what it finds in the options after it through it.
    w.mhd = d->api->start_daemon(
        flags, 0, nullptr, nullptr, &on_request, d.get(), MHD_OPTION_EXTERNAL_LOGGER, &on_mhd_log,
        shared.log, MHD_OPTION_CONNECTION_TIMEOUT, timeout_s, MHD_OPTION_CONNECTION_LIMIT,
        static_cast<unsigned>(w.limit + http::kEvictHeadroom + 1), MHD_OPTION_NOTIFY_COMPLETED,
        &on_completed, d.get(), MHD_OPTION_URI_LOG_CALLBACK, &on_uri, nullptr,
        MHD_OPTION_NOTIFY_CONNECTION, &on_connection, &w, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        kConnectionMemoryBytes, MHD_OPTION_ARRAY, tls_options, MHD_OPTION_END);
    if (!w.mhd && tls)  // `d` stops the workers started so far
      throw std::runtime_error(
          "cannot start the HTTPS server on " + s.bind.str() + " with cert_file \"" +
          s.tls.cert_file + "\" and key_file \"" + s.tls.key_file +
          "\": " + (mhd_messages.empty() ? std::string(std::strerror(errno)) : mhd_messages));
    if (!w.mhd)
      throw std::runtime_error("cannot start the HTTP server on " + s.bind.str() + ": " +
                               std::strerror(errno));
  }
  return d;
}

}  // namespace

int auto_worker_threads() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  return std::clamp(cpus, 1, kMaxAutoThreads);
}

std::string http_library_version() {
  const MhdApi& linked = linked_mhd();
  return linked.name + (linked.tls
                            ? " (with TLS)"
                            : std::string(" (without TLS; [http.tls] loads ") + kTlsLibrary + ")");
}

std::string http_tls_library() {
  return tls_mhd().name;
}

namespace {
std::shared_ptr<const Authenticator> make_authenticator(const HttpAuth& a) {
  return a.enabled() ? std::make_shared<const Authenticator>(a) : nullptr;
}
}  // namespace

HttpServer::HttpServer(HttpSettings settings, std::shared_ptr<const Router> router, Logger& log)
    : settings_(std::move(settings)),
      log_(log),
      slot_signal_(std::make_unique<http::SlotSignal>()) {
  if (settings_.threads <= 0) settings_.threads = auto_worker_threads();
  published_.store(std::make_shared<const Published>(
      Published{std::move(router), settings_.cors_origins, make_authenticator(settings_.auth)}));
}

namespace {

using http::bound_port;
using http::open_listener;
using http::OwnedFd;
using http::same_host;

// What takes a new daemon: another address, or any of these.
bool needs_new_daemon(const HttpSettings& a, const HttpSettings& b, bool same_address) {
  return !same_address || a.threads != b.threads || a.keep_alive != b.keep_alive ||
         a.max_connections != b.max_connections || !(a.tls == b.tls);
}

constexpr auto kRetireWait = std::chrono::seconds(2);

}  // namespace

ServerShared HttpServer::shared() {
  return {&published_, &log_, &gzip_cache_, &auth_limiter_, &auth_counters_, slot_signal_.get()};
}

HttpServer::~HttpServer() {
  stop();
}

void HttpServer::start() {
  if (daemon_) return;
  OwnedFd listener(open_listener(settings_.bind));
  const std::uint16_t port = bound_port(listener.fd);
  auto daemon = start_daemon(settings_, shared());
  auto acceptor = std::make_unique<http::Acceptor>(log_, *slot_signal_);
  acceptor->start(listener.release(), daemon.get(), settings_.bind);
  daemon_ = std::move(daemon);
  acceptor_ = std::move(acceptor);
  port_.store(port, std::memory_order_release);
}

void HttpServer::reconfigure(HttpSettings settings, std::shared_ptr<const Router> router) {
  if (settings.threads <= 0) settings.threads = auto_worker_threads();
  reap_retired(false);
  // Everything that can fail comes first; the old daemon, listener, settings and routes are
  // untouched until the commit below.
  // Unchanged [http.auth] keeps its Authenticator, and so its cache of verified credentials.
  auto auth = published_.load(std::memory_order_acquire)->auth;
  if (!(settings.auth == settings_.auth)) auth = make_authenticator(settings.auth);
  auto next_published = std::make_shared<const Published>(
      Published{std::move(router), settings.cors_origins, std::move(auth)});
  std::unique_ptr<HttpDaemon> next;
  OwnedFd listener(-1);  // a new listening socket, for a new address
  BindAddress own = settings_.bind;
  own.port = port();
  // The address in use: the same host, and the port configured or the one it got for port 0.
  const bool same_address =
      same_host(settings.bind, own) && settings.bind.ipv6 == own.ipv6 &&
      (settings.bind.port == settings_.bind.port || settings.bind.port == own.port);
  if (daemon_ && needs_new_daemon(settings_, settings, same_address)) {
    // The same address keeps its socket, so no connection attempt finds the port closed; a new
    // one listens before the old one closes.
    if (!same_address) listener.fd = open_listener(settings.bind, &own);
    const std::uint16_t new_port = same_address ? port() : bound_port(listener.fd);
    next = start_daemon(settings, shared());
    // The switch: new connections go to `next` from here on, and a new address replaces the old
    // one. Fails (before any change) only if the new listener cannot be watched.
    acceptor_->switch_to(next.get(), listener.release(), settings.bind);
    port_.store(new_port, std::memory_order_release);
  }

  // Commit: nothing below fails.
  published_.store(std::move(next_published), std::memory_order_release);
  if (next) {
    std::unique_ptr<HttpDaemon> old = std::move(daemon_);
    daemon_ = std::move(next);
    log_.debug("http: " + std::to_string(daemon_->settings.threads) + " workers on " +
               daemon_->settings.bind.str() + " took over from " + old->settings.bind.str());
    retire(std::move(old));
  }
  settings_ = std::move(settings);
}

void HttpServer::retire(std::unique_ptr<HttpDaemon> old) {
  // The acceptor hands it nothing from now on (switch_to() returned). Connections it holds get
  // "Connection: close" with their next answer and go.
  old->draining.store(true, std::memory_order_relaxed);
  HttpDaemon* d = old.get();
  d->retirer = std::thread([d] {
    // Stopped once no connection is left (including those handed over but not yet taken up by
    // a worker), or after kRetireWait, or (stop()) once nothing is in flight. (A connection MHD
    // failed to take up, out of memory, never closes in our count: then kRetireWait.)
    const auto begin = std::chrono::steady_clock::now();
    for (auto now = begin; now < begin + kRetireWait; now = std::chrono::steady_clock::now()) {
      if (d->in_flight.load(std::memory_order_acquire) == 0 &&
          (d->hurry.load() || !d->has_connections()))
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    d->shut_down();
    d->done.store(true, std::memory_order_release);
  });
  retiring_.push_back(std::move(old));
}

void HttpServer::reap_retired(bool all) {
  for (auto it = retiring_.begin(); it != retiring_.end();) {
    if (all) (*it)->hurry.store(true);
    if (all || (*it)->done.load(std::memory_order_acquire)) {
      (*it)->retirer.join();
      it = retiring_.erase(it);
    } else {
      ++it;
    }
  }
}

void HttpServer::stop() {
  // No new connections first (the address refuses from here on), then the daemons, whose
  // in-flight requests finish.
  acceptor_.reset();
  port_.store(0, std::memory_order_release);
  if (daemon_) daemon_->shut_down();
  daemon_.reset();
  reap_retired(true);
}

std::shared_ptr<const Router> HttpServer::router() const {
  return published_.load(std::memory_order_acquire)->router;
}

int HttpServer::requests_in_flight() const {
  int n = daemon_ ? daemon_->in_flight.load() : 0;
  for (auto& d : retiring_) n += d->in_flight.load();
  return n;
}

std::vector<HttpRequestCount> HttpServer::request_counts() const {
  return published_.load(std::memory_order_acquire)->router->request_counts();
}

}  // namespace kiwi::agent
