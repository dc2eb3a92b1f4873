// The HTTP server: libmicrohttpd with an internal epoll thread pool. Everything MHD-specific lives
// here; requests reach handlers through the Router as plain kiwi::Request values.
#pragma once

#include <cstdint>
#include <string>

#include "config.hpp"
#include "router.hpp"

struct MHD_Daemon;

namespace kiwi::agent {

struct HttpSettings {
  BindAddress bind;
  int threads = 4;
  Millis keep_alive{5000};
  int max_connections = 256;
};

class HttpServer {
 public:
  HttpServer(HttpSettings settings, const Router& router, Logger& log);
  ~HttpServer();

  // Binds and starts the worker threads. Throws std::runtime_error naming the address and reason.
  void start();
  // Stops accepting, finishes nothing new, joins the workers. Idempotent.
  void stop();
  // The bound port (useful when the config asked for port 0).
  std::uint16_t port() const;

  struct Context {  // what the MHD callbacks need
    const Router* router;
    Logger* log;
  };

 private:
  HttpSettings settings_;
  Context context_;
  Logger& log_;
  MHD_Daemon* daemon_ = nullptr;
};

}  // namespace kiwi::agent
