// The HTTP server: what the agent serves its routes with. start() binds and serves,
// reconfigure() applies a reload while serving without refusing a connection, stop() stops.
// Nothing of how shows here; inside the layer, the acceptor (acceptor.hpp) owns the listening
// socket and hands each connection to a worker, keeping max_connections; the workers are
// libmicrohttpd's (mhd_workers.hpp, through mhd_api.hpp's table: the linked library, or the TLS
// one for [http.tls]); every request passes the request gates (gates.hpp: limits, CORS,
// authentication, the route and its handler) and goes out compressed when the server chooses to
// (response_cache.hpp; kiwi::Response says when). Handlers see plain kiwi::Request values.
#pragma once

#include <cstdint>
#include <kiwi/model.hpp>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/schema.hpp"

namespace kiwi::agent {

// The configured values default to the host schema's rows (config/schema.hpp).
struct HttpSettings {
  BindAddress bind;
  int threads = schema_defaults().http.threads;  // 0 ("auto"): auto_worker_threads()
  Millis keep_alive = schema_defaults().http.keep_alive;
  int max_connections = schema_defaults().http.max_connections;
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

class Router;     // router.hpp
class GzipCache;  // response_cache.hpp

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
  std::uint16_t port() const;
  // Worker threads serving requests ("auto" resolved).
  int threads() const;
  // The settings in effect (threads resolved).
  const HttpSettings& settings() const;
  std::shared_ptr<const Router> router() const;
  // Request counts of the current routes and "unmatched", carried over across reloads by path.
  std::vector<HttpRequestCount> request_counts() const;
  // The gzip of bodies with an ETag, shared by every worker (and kept across reloads: a body of a
  // handler that a reload kept is still served). Thread-safe.
  const GzipCache& gzip_cache() const;
  // Requests refused for their credentials, and unchecked for a blocked address (since start).
  std::uint64_t auth_failures() const;
  std::uint64_t auth_rate_limited() const;
  // Requests between their first callback and their completion (a connection's request is done
  // and the connection idle once it is back to 0), on the current and the draining workers. For
  // tests that wait for a request to finish; belongs to the calling thread, as threads() does.
  int requests_in_flight() const;

 private:
  struct State;  // the acceptor, the sets of workers and what they share (http_server.cpp)
  std::unique_ptr<State> state_;
};

}  // namespace kiwi::agent
