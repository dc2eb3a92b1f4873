// The HTTP server: libmicrohttpd workers (one single-threaded epoll daemon each), fed by an
// acceptor thread of ours ("kiwi-accept") that owns the listening socket and hands each new
// connection to a worker of the current set, so a reload can move accepting between sets without
// MHD's quiesce, and max_connections is kept by the acceptor. Everything MHD-specific lives here
// (called through mhd_api.hpp's table: the linked library, or the TLS one for [http.tls]);
// requests reach handlers through the Router as plain kiwi::Request values. The server also owns
// what is the same for every route: compression (gzip.hpp; kiwi::Response says when), CORS,
// request limits and counters.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "config/config.hpp"
#include "http/auth.hpp"
#include "http/response_cache.hpp"
#include "http/router.hpp"

struct MHD_Daemon;

namespace kiwi::agent {

struct HttpSettings {
  BindAddress bind;
  int threads = 0;  // 0: auto_worker_threads()
  Millis keep_alive{5000};
  int max_connections = 256;
  std::vector<std::string> cors_origins;  // exact origins allowed to read responses; empty = none
  HttpAuth auth;                          // [http.auth]; off unless enabled()
  HttpTls tls;                            // [http.tls]; off unless enabled()
};

// `[http] threads = "auto"`: one worker per CPU this process may run on (its affinity mask, so
// taskset and cgroup cpusets count), at most kMaxAutoThreads. Each connection belongs to one
// worker for its lifetime (the acceptor gives it to the one with the fewest), so workers beyond
// the CPUs only time-slice: a preempted worker stalls all of its connections for a scheduler
// slice, which shows as p95 latency under load.
inline constexpr int kMaxAutoThreads = 4;
int auto_worker_threads();

// "libmicrohttpd 0.9.75 (without TLS; [http.tls] loads libmicrohttpd.so.12)": the library the
// agent runs on, for --version.
std::string http_library_version();
// The library that serves [http.tls] ("libmicrohttpd 0.9.75 (libmicrohttpd.so.12)"); loads it.
std::string http_tls_library();

// Limits on a request, answered with a JSON error before any handler runs.
inline constexpr std::size_t kMaxUriBytes = 2048;                 // longer: 414
inline constexpr std::size_t kMaxHeaderBytes = 8 * 1024;          // whole header block larger: 431
inline constexpr std::size_t kMaxBodyBytes = 64 * 1024;           // larger: 413 (cgi reads bodies)
inline constexpr std::size_t kConnectionMemoryBytes = 16 * 1024;  // MHD's pool per connection

namespace http {
struct HttpDaemon;    // one set of MHD workers and its requests in flight (http_server.cpp)
struct ServerShared;  // what every set of workers shares with the server (http_server.cpp)
class Acceptor;       // the listening socket and the thread that accepts on it (acceptor.hpp)
struct SlotSignal;    // a worker tells the acceptor that a connection closed (acceptor.hpp)
struct Published;     // what a request reads: routes, CORS origins, authentication (gates.hpp)
}  // namespace http

// The server's threads: start(), reconfigure() and stop() are called from one thread (the
// agent's main thread); the acceptor thread accepts connections; requests run on the workers.
// port(), router() and request_counts() are safe from any thread (handlers build /api/health and
// /metrics from them); threads() and settings() belong to the calling thread.
class HttpServer {
 public:
  HttpServer(HttpSettings settings, std::shared_ptr<const Router> router, Logger& log);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, starts the worker threads and the acceptor. Throws std::runtime_error naming the address
  // and reason.
  void start();
  // Applies new settings and routes while serving (a reload). Routes and cors_origins are swapped
  // atomically: a request sees the old or the new set, whole. A change of bind, threads,
  // keep_alive or max_connections starts a new daemon that takes over from the old one without
  // refusing a connection: the acceptor sends new connections to it from one moment on (between
  // two of its batches of accepts); a new address is listened on before the old listener closes
  // (the connections already queued on the old one go to the new daemon too); the same address
  // keeps its listening socket. The old daemon gets no connection after that moment, answers what
  // it has (with "Connection: close", so kept-alive clients move over) and stops once it has no
  // connection left, after 2 s at most. On failure throws std::runtime_error worded as start()'s,
  // and nothing changed: the old listener, settings and routes serve on. Before start(), only
  // stores them.
  void reconfigure(HttpSettings settings, std::shared_ptr<const Router> router);
  // Stops the acceptor and closes the listener (the address refuses from then on), then joins the
  // workers after in-flight requests. Idempotent.
  void stop();
  // The bound port (useful when the config asked for port 0); 0 when not serving.
  std::uint16_t port() const { return port_.load(std::memory_order_acquire); }
  // Worker threads serving requests ("auto" resolved).
  int threads() const { return settings_.threads; }
  // The settings in effect (threads resolved).
  const HttpSettings& settings() const { return settings_; }
  std::shared_ptr<const Router> router() const;
  // Request counts of the current routes and "unmatched", carried over across reloads by path.
  std::vector<HttpRequestCount> request_counts() const;
  // The gzip of bodies with an ETag, shared by every worker (and kept across reloads: a body of a
  // handler that a reload kept is still served). Thread-safe.
  const GzipCache& gzip_cache() const { return gzip_cache_; }
  // Requests refused for their credentials, and unchecked for a blocked address (since start).
  std::uint64_t auth_failures() const { return auth_counters_.invalid.load(); }
  std::uint64_t auth_rate_limited() const { return auth_counters_.rate_limited.load(); }
  // Requests between their first callback and their completion (a connection's request is done
  // and the connection idle once it is back to 0), on the current and the draining workers. For
  // tests that wait for a request to finish; belongs to the calling thread, as threads() does.
  int requests_in_flight() const;

 private:
  http::ServerShared shared();
  void retire(std::unique_ptr<http::HttpDaemon> old);
  void reap_retired(bool all);

  HttpSettings settings_;
  Logger& log_;
  std::atomic<std::shared_ptr<const http::Published>> published_;
  GzipCache gzip_cache_;      // before the daemons: outlives their workers
  AuthLimiter auth_limiter_;  // failed attempts by address, kept across reloads
  AuthCounters auth_counters_;
  std::unique_ptr<http::SlotSignal> slot_signal_;  // before the workers and acceptor: outlives them
  std::unique_ptr<http::HttpDaemon> daemon_;
  std::unique_ptr<http::Acceptor> acceptor_;                 // feeds daemon_; null when not serving
  std::vector<std::unique_ptr<http::HttpDaemon>> retiring_;  // draining, each with its thread
  std::atomic<std::uint16_t> port_{0};
};

}  // namespace kiwi::agent
