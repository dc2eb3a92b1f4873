#include "http/mhd_workers.hpp"

#include <microhttpd.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "http/mhd_api.hpp"
#include "http/mhd_response.hpp"
#include "http/sockets.hpp"

namespace kiwi::agent::http {

namespace {

// A worker of libmicrohttpd: an MHD daemon with no listening socket.
struct HttpWorker final : Worker {
  const MhdApi* api = nullptr;  // its daemon's library (HttpDaemon::api)
  MHD_Daemon* mhd = nullptr;
  StreamWaker* waker = nullptr;  // its set's (HttpDaemon::waker)

  ~HttpWorker() override { stop(); }
  bool add_connection(int fd, const sockaddr* addr, socklen_t len) override {
    return api->add_connection(mhd, fd, addr, len) == MHD_YES;
  }
  void stop() override {
    // MHD 0.9.75 aborts when stopped with a connection suspended: none is, after this.
    if (mhd && waker) waker->stop_worker(mhd);
    if (mhd) api->stop_daemon(mhd);
    mhd = nullptr;
  }
};

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
  return info ? address_text(info->client_addr) : std::string();
}

// The address and port the connection came in on ("127.0.0.1", "::1"); {"", 0} if unknown.
std::pair<std::string, std::uint16_t> local_address(const MhdApi& mhd, MHD_Connection* c) {
  const MHD_ConnectionInfo* info = mhd.get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (!info) return {};
  return local_address_of(info->connect_fd);
}

// First call: headers only. Answering now would count as an early response in MHD 0.9.75 and
// close kept-alive connections, so answer on a later call. From here to on_completed the request
// is in flight: a replaced daemon is not stopped under it.
MHD_Result begin_request(HttpDaemon& daemon, MHD_Connection* c, RequestState* st, void** state) {
  if (st)
    st->started = true;
  else
    *state = &first_call_marker;
  if (ConnectionSlot* slot = slot_of(*daemon.api, c)) slot->request_started();
  daemon.in_flight.fetch_add(1, std::memory_order_relaxed);
  return MHD_YES;
}

// A piece of the body: kept up to kMaxBodyBytes, past which the request is answered 413.
MHD_Result receive_body(const char* data, size_t* size, RequestState* st, void** state) {
  if (!st) {
    *state = st = new RequestState;
    st->started = true;
  }
  if (st->data.size() + *size > kMaxBodyBytes)
    st->too_large = true;
  else
    st->data.append(data, *size);
  *size = 0;
  return MHD_YES;
}

// The last call: the request read into a kiwi::Request, answered by the request gates, and the
// answer queued.
MHD_Result answer(HttpDaemon& daemon, MHD_Connection* c, const char* url, const char* method,
                  const char* version, const RequestState* st) {
  const MhdApi& mhd = *daemon.api;
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
      daemon.shared.published->load(std::memory_order_acquire);
  const Router& router = *published->router;
  const GateInput in{req,
                     raw_path,
                     st && st->too_large,
                     *published,
                     router.route_of(req.path),
                     *daemon.shared.auth_limiter,
                     *daemon.shared.auth_counters};
  // The worker's response of its last request, reused (see answer_request). It keeps that body
  // until the next request, as LastResponse does.
  thread_local Response res;
  const int route = answer_request(in, res);
  router.count(route, res.status);

  // A status that has no body (1xx, 204, 304): a stream is let go unread (its destructor stops
  // what produces it) and the answer goes without one. Streamed, libmicrohttpd 0.9.75 would send
  // chunked framing after a 304's headers, which a keep-alive client reads as the next response.
  if (res.stream && (res.status < 200 || res.status == 204 || res.status == 304)) {
    res.stream.reset();
    res.body = {};
  }
  if (res.stream) {
    // A body produced as it goes (mhd_stream.hpp): a response of its own, never reused. It holds
    // the handler instance, whose streams must all be released before its destroy() (ABI 1.4).
    std::shared_ptr<const void> instance;
    if (route >= 0) instance = router.routes()[static_cast<std::size_t>(route)].handler;
    MHD_Response* streamed =
        make_stream_response(mhd, res, std::move(instance), c, daemon.waker,
                             daemon.draining.load(std::memory_order_relaxed), req.method == "HEAD");
    res.stream.reset();  // the response has it (or released it): not kept by this thread
    if (!streamed) return MHD_NO;
    const MHD_Result queued = mhd.queue_response(c, static_cast<unsigned>(res.status), streamed);
    mhd.destroy_response(streamed);  // the connection holds it until it is sent
    return queued;
  }

  const std::shared_ptr<LoadedLibrary>* code =
      route >= 0 ? &router.routes()[static_cast<std::size_t>(route)].handler->library : nullptr;
  MHD_Response* response =
      make_response(mhd, res, req.accepts_gzip(), daemon.draining.load(std::memory_order_relaxed),
                    *daemon.shared.gzip, code);
  if (!response) return MHD_NO;
  return mhd.queue_response(c, static_cast<unsigned>(res.status), response);
}

MHD_Result on_request(void* cls, MHD_Connection* c, const char* url, const char* method,
                      const char* version, const char* upload_data, size_t* upload_size,
                      void** state) {
  auto& daemon = *static_cast<HttpDaemon*>(cls);
  RequestState* st = state_of(*state);
  if (*state == nullptr || *state == &uri_marker || (st && !st->started))
    return begin_request(daemon, c, st, state);
  if (*upload_size != 0) return receive_body(upload_data, upload_size, st, state);
  return answer(daemon, c, url, method, version, st);
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

}  // namespace

HttpDaemon::~HttpDaemon() {
  if (retirer.joinable()) {
    hurry.store(true);
    retirer.join();
  }
  shut_down();
}

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
  // MHD_ALLOW_SUSPEND_RESUME: a connection waiting on a streamed body is suspended
  // (mhd_stream.hpp).
  const unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
                         MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_NO_LISTEN_SOCKET |
                         (tls ? MHD_USE_TLS : 0);
  const auto timeout_s = static_cast<unsigned>(s.keep_alive.count() / 1000);
  const auto threads = static_cast<std::uint64_t>(s.threads);
  const auto max_connections = static_cast<std::uint64_t>(s.max_connections);
  ensure_descriptors(max_connections, *shared.log);
  for (std::uint64_t i = 0; i < threads; ++i) {
    auto worker = std::make_unique<HttpWorker>();
    auto& w = *worker;
    d->workers.push_back(std::move(worker));
    w.api = d->api;
    w.waker = &d->waker;
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
        static_cast<unsigned>(w.limit + kEvictHeadroom + 1), MHD_OPTION_NOTIFY_COMPLETED,
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

}  // namespace kiwi::agent::http
