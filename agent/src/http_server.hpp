// The HTTP server: libmicrohttpd with an internal epoll thread pool. Everything MHD-specific lives
// here; requests reach handlers through the Router as plain kiwi::Request values. The server also
// owns what is the same for every route: gzip negotiation, CORS, request limits and counters.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "config.hpp"
#include "router.hpp"

struct MHD_Daemon;

namespace kiwi::agent {

struct HttpSettings {
  BindAddress bind;
  int threads = 0;  // 0: auto_worker_threads()
  Millis keep_alive{5000};
  int max_connections = 256;
  std::vector<std::string> cors_origins;  // exact origins allowed to read responses; empty = none
};

// `[http] threads = "auto"`: one worker per CPU this process may run on (its affinity mask, so
// taskset and cgroup cpusets count), at most kMaxAutoThreads. MHD binds each connection to one
// worker for its lifetime, so workers beyond the CPUs only time-slice: a preempted worker stalls
// all of its connections for a scheduler slice, which shows as p95 latency under load.
inline constexpr int kMaxAutoThreads = 4;
int auto_worker_threads();

// "libmicrohttpd 0.9.75 (without TLS)": the library the agent runs on, for --version.
std::string http_library_version();

// Limits on a request, answered with a JSON error before any handler runs.
inline constexpr std::size_t kMaxUriBytes = 2048;         // longer: 414
inline constexpr std::size_t kMaxHeaderBytes = 8 * 1024;  // whole header block larger: 431
inline constexpr std::size_t kMaxBodyBytes = 64 * 1024;   // larger: 413 (routes ignore bodies)
inline constexpr std::size_t kConnectionMemoryBytes = 16 * 1024;  // MHD's pool per connection

// Request counters by route and status, lock-free; statuses outside the table count as "other".
class RequestCounters {
 public:
  static constexpr std::array<int, 12> kStatuses = {200, 204, 304, 400, 404, 405,
                                                    413, 414, 431, 500, 503, 0 /* other */};
  explicit RequestCounters(std::size_t routes) : counts_(routes + 1) {}
  void add(int route_index, int status);
  // Non-zero counts; route -1 is reported as "unmatched".
  std::vector<HttpRequestCount> snapshot(const std::vector<Route>& routes) const;

 private:
  using Row = std::array<std::atomic<std::uint64_t>, kStatuses.size()>;
  std::vector<Row> counts_;  // index 0: unmatched, i + 1: route i
};

class HttpServer {
 public:
  HttpServer(HttpSettings settings, const Router& router, Logger& log);
  ~HttpServer();

  // Binds and starts the worker threads. Throws std::runtime_error naming the address and reason.
  void start();
  // Stops accepting and joins the workers after in-flight requests. Idempotent.
  void stop();
  // The bound port (useful when the config asked for port 0).
  std::uint16_t port() const;
  // Worker threads serving requests ("auto" resolved).
  int threads() const { return settings_.threads; }
  const RequestCounters& counters() const { return context_.counters; }

  struct Context {  // what the MHD callbacks need
    const Router* router;
    Logger* log;
    const HttpSettings* settings;
    RequestCounters counters;
  };

 private:
  HttpSettings settings_;
  Context context_;
  MHD_Daemon* daemon_ = nullptr;
};

}  // namespace kiwi::agent
