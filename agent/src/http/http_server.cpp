#include "http/http_server.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "http/acceptor.hpp"
#include "http/gates.hpp"
#include "http/mhd_workers.hpp"
#include "http/sockets.hpp"

namespace kiwi::agent {

namespace {

using http::Acceptor;
using http::bound_port;
using http::HttpDaemon;
using http::open_listener;
using http::OwnedFd;
using http::Published;
using http::same_host;
using http::ServerShared;
using http::SlotSignal;
using http::start_daemon;

// What takes a new daemon: another address, or any of these.
bool needs_new_daemon(const HttpSettings& a, const HttpSettings& b, bool same_address) {
  return !same_address || a.threads != b.threads || a.keep_alive != b.keep_alive ||
         a.max_connections != b.max_connections || !(a.tls == b.tls);
}

constexpr auto kRetireWait = std::chrono::seconds(2);

std::shared_ptr<const Authenticator> make_authenticator(const HttpAuth& a) {
  return a.enabled() ? std::make_shared<const Authenticator>(a) : nullptr;
}

}  // namespace

int auto_worker_threads() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  return std::clamp(cpus, 1, kMaxAutoThreads);
}

// What the server owns. The gzip cache, the auth limiter and counters and the slot signal come
// before the workers and the acceptor: they outlive them.
struct HttpServer::State {
  State(HttpSettings s, Logger& l) : settings(std::move(s)), log(l) {}

  ServerShared shared() {
    return {&published, &log, &gzip_cache, &auth_limiter, &auth_counters, &slot_signal};
  }
  void retire(std::unique_ptr<HttpDaemon> old);
  void reap_retired(bool all);

  HttpSettings settings;
  Logger& log;
  std::atomic<std::shared_ptr<const Published>> published;  // what a request reads
  GzipCache gzip_cache;
  AuthLimiter auth_limiter;  // failed attempts by address, kept across reloads
  AuthCounters auth_counters;
  SlotSignal slot_signal;
  std::unique_ptr<HttpDaemon> daemon;
  std::unique_ptr<Acceptor> acceptor;                 // feeds `daemon`; null when not serving
  std::vector<std::unique_ptr<HttpDaemon>> retiring;  // draining, each with its thread
  std::atomic<std::uint16_t> port{0};
};

HttpServer::HttpServer(HttpSettings settings, std::shared_ptr<const Router> router, Logger& log)
    : state_(std::make_unique<State>(std::move(settings), log)) {
  State& s = *state_;
  if (s.settings.threads <= 0) s.settings.threads = auto_worker_threads();
  s.published.store(std::make_shared<const Published>(
      Published{std::move(router), s.settings.cors_origins, make_authenticator(s.settings.auth)}));
}

HttpServer::~HttpServer() {
  stop();
}

void HttpServer::start() {
  State& s = *state_;
  if (s.daemon) return;
  OwnedFd listener(open_listener(s.settings.bind));
  const std::uint16_t port = bound_port(listener.fd);
  auto daemon = start_daemon(s.settings, s.shared());
  auto acceptor = std::make_unique<Acceptor>(s.log, s.slot_signal);
  acceptor->start(listener.release(), daemon.get(), s.settings.bind);
  s.daemon = std::move(daemon);
  s.acceptor = std::move(acceptor);
  s.port.store(port, std::memory_order_release);
}

void HttpServer::reconfigure(HttpSettings settings, std::shared_ptr<const Router> router) {
  State& s = *state_;
  if (settings.threads <= 0) settings.threads = auto_worker_threads();
  s.reap_retired(false);
  // Everything that can fail comes first; the old daemon, listener, settings and routes are
  // untouched until the commit below.
  // Unchanged [http.auth] keeps its Authenticator, and so its cache of verified credentials.
  auto auth = s.published.load(std::memory_order_acquire)->auth;
  if (!(settings.auth == s.settings.auth)) auth = make_authenticator(settings.auth);
  auto next_published = std::make_shared<const Published>(
      Published{std::move(router), settings.cors_origins, std::move(auth)});
  std::unique_ptr<HttpDaemon> next;
  OwnedFd listener(-1);  // a new listening socket, for a new address
  BindAddress own = s.settings.bind;
  own.port = port();
  // The address in use: the same host, and the port configured or the one it got for port 0.
  const bool same_address =
      same_host(settings.bind, own) && settings.bind.ipv6 == own.ipv6 &&
      (settings.bind.port == s.settings.bind.port || settings.bind.port == own.port);
  if (s.daemon && needs_new_daemon(s.settings, settings, same_address)) {
    // The same address keeps its socket, so no connection attempt finds the port closed; a new
    // one listens before the old one closes.
    if (!same_address) listener.fd = open_listener(settings.bind, &own);
    const std::uint16_t new_port = same_address ? port() : bound_port(listener.fd);
    next = start_daemon(settings, s.shared());
    // The switch: new connections go to `next` from here on, and a new address replaces the old
    // one. Fails (before any change) only if the new listener cannot be watched.
    s.acceptor->switch_to(next.get(), listener.release(), settings.bind);
    s.port.store(new_port, std::memory_order_release);
  }

  // Commit: nothing below fails.
  s.published.store(std::move(next_published), std::memory_order_release);
  if (next) {
    std::unique_ptr<HttpDaemon> old = std::move(s.daemon);
    s.daemon = std::move(next);
    s.log.debug("http: " + std::to_string(s.daemon->settings.threads) + " workers on " +
                s.daemon->settings.bind.str() + " took over from " + old->settings.bind.str());
    s.retire(std::move(old));
  }
  s.settings = std::move(settings);
}

void HttpServer::State::retire(std::unique_ptr<HttpDaemon> old) {
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
  retiring.push_back(std::move(old));
}

void HttpServer::State::reap_retired(bool all) {
  for (auto it = retiring.begin(); it != retiring.end();) {
    if (all) (*it)->hurry.store(true);
    if (all || (*it)->done.load(std::memory_order_acquire)) {
      (*it)->retirer.join();
      it = retiring.erase(it);
    } else {
      ++it;
    }
  }
}

void HttpServer::stop() {
  State& s = *state_;
  // No new connections first (the address refuses from here on), then the daemons, whose
  // in-flight requests finish.
  s.acceptor.reset();
  s.port.store(0, std::memory_order_release);
  if (s.daemon) s.daemon->shut_down();
  s.daemon.reset();
  s.reap_retired(true);
}

std::uint16_t HttpServer::port() const {
  return state_->port.load(std::memory_order_acquire);
}

int HttpServer::threads() const {
  return state_->settings.threads;
}

const HttpSettings& HttpServer::settings() const {
  return state_->settings;
}

std::shared_ptr<const Router> HttpServer::router() const {
  return state_->published.load(std::memory_order_acquire)->router;
}

std::vector<HttpRequestCount> HttpServer::request_counts() const {
  return state_->published.load(std::memory_order_acquire)->router->request_counts();
}

const GzipCache& HttpServer::gzip_cache() const {
  return state_->gzip_cache;
}

std::uint64_t HttpServer::auth_failures() const {
  return state_->auth_counters.invalid.load();
}

std::uint64_t HttpServer::auth_rate_limited() const {
  return state_->auth_counters.rate_limited.load();
}

int HttpServer::requests_in_flight() const {
  const State& s = *state_;
  int n = s.daemon ? s.daemon->in_flight.load() : 0;
  for (auto& d : s.retiring) n += d->in_flight.load();
  return n;
}

}  // namespace kiwi::agent
