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

using http::bound_port;
using http::HttpDaemon;
using http::open_listener;
using http::OwnedFd;
using http::Published;
using http::same_host;
using http::ServerShared;
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

HttpServer::HttpServer(HttpSettings settings, std::shared_ptr<const Router> router, Logger& log)
    : settings_(std::move(settings)),
      log_(log),
      slot_signal_(std::make_unique<http::SlotSignal>()) {
  if (settings_.threads <= 0) settings_.threads = auto_worker_threads();
  published_.store(std::make_shared<const Published>(
      Published{std::move(router), settings_.cors_origins, make_authenticator(settings_.auth)}));
}

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
