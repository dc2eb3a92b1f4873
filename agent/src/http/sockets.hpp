// The listening socket, opened by the agent rather than by libmicrohttpd (the acceptor accepts on
// it and hands connections to the workers, acceptor.hpp), and the descriptors it takes.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <utility>

#include "base/log.hpp"
#include "config/config.hpp"

namespace kiwi::agent::http {

// Whether `a` and `b` name the same host address (the spelling aside: "::1" and "0::1").
bool same_host(const BindAddress& a, const BindAddress& b);

// The listening socket, opened here rather than by MHD so that a failure names its real cause
// (MHD's own errno does not survive its clean-up). `own`: where the agent listens now (a reload),
// if it does. Throws std::runtime_error.
int open_listener(const BindAddress& b, const BindAddress* own = nullptr);

// The port `fd` is bound to; 0 if unknown.
std::uint16_t bound_port(int fd);

// The text of an IPv4 or IPv6 socket address ("192.0.2.7", "::1"); "" for null or another family.
std::string address_text(const sockaddr* address);
// The address and port a connected socket came in on ("127.0.0.1", "::1"); {"", 0} if unknown.
std::pair<std::string, std::uint16_t> local_address_of(int fd);

// Descriptors the process needs for `max_connections`: twice that (a reload runs the old workers
// beside the new ones until they drain), plus the store, plugins' files, the exec sensor's pipes
// and MHD's own. A soft RLIMIT_NOFILE below it is raised as far as the hard limit allows (the
// default 1,024 of a shell or of systemd is below it past about 380 connections); the default
// max_connections, 256, needs no change, so scripts the agent runs inherit the usual limit. Where
// the hard limit is too low, the log says so: accept() would fail with EMFILE and new
// connections would wait for a free descriptor.
void ensure_descriptors(std::uint64_t max_connections, Logger& log);

// A descriptor closed unless released.
struct OwnedFd {
  int fd = -1;
  explicit OwnedFd(int f) : fd(f) {}
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  ~OwnedFd() {
    if (fd >= 0) ::close(fd);
  }
  int release() { return std::exchange(fd, -1); }
};

}  // namespace kiwi::agent::http
