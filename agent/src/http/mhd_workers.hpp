// libmicrohttpd's side of the server: a set of workers (one MHD daemon with a thread of its own
// each, fed by the acceptor), MHD's callbacks, which read a request into a kiwi::Request, answer
// it through the request gates (gates.hpp) and queue the answer (mhd_response.hpp), and the
// library's start and stop. No MHD type here: they stay in the .cpp files.
#pragma once

#include <atomic>
#include <memory>
#include <thread>

#include "http/acceptor.hpp"
#include "http/auth.hpp"
#include "http/gates.hpp"
#include "http/http_server.hpp"
#include "http/mhd_stream.hpp"
#include "http/response_cache.hpp"

namespace kiwi::agent {

struct MhdApi;

namespace http {

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
  const MhdApi* api = nullptr;
  std::atomic<bool> draining{false};  // replaced: answer with "Connection: close"
  std::atomic<int> in_flight{0};      // requests between their first and completion callbacks
  std::atomic<bool> hurry{false};     // stop(): wait for requests in flight only, not connections
  std::atomic<bool> done{false};      // the retirer has stopped it
  std::thread retirer;
  // Wakes this set's connections that wait on a streamed body. Declared after nothing the
  // workers need: ~HttpDaemon stops the workers (which resume their waiting connections here)
  // before its members go.
  StreamWaker waker;

  HttpDaemon() = default;
  HttpDaemon(const HttpDaemon&) = delete;
  HttpDaemon& operator=(const HttpDaemon&) = delete;
  ~HttpDaemon();
};

// Starts a set of s.threads workers for `s`, on the linked libmicrohttpd or, for [http.tls], the
// TLS one (loaded on its first use). Throws std::runtime_error naming the address (and for TLS,
// the files and GnuTLS's reason).
std::unique_ptr<HttpDaemon> start_daemon(const HttpSettings& s, const ServerShared& shared);

}  // namespace http

}  // namespace kiwi::agent
