#include "http/sockets.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace kiwi::agent::http {

namespace {

// The socket address of `b`, and its length.
socklen_t socket_address(const BindAddress& b, sockaddr_storage& addr) {
  addr = {};
  if (b.ipv6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(b.port);
    inet_pton(AF_INET6, b.host.c_str(), &a->sin6_addr);
    return sizeof *a;
  }
  auto* a = reinterpret_cast<sockaddr_in*>(&addr);
  a->sin_family = AF_INET;
  a->sin_port = htons(b.port);
  inet_pton(AF_INET, b.host.c_str(), &a->sin_addr);
  return sizeof *a;
}

bool is_wildcard(const BindAddress& b) {
  BindAddress any = b;
  any.host = b.ipv6 ? "::" : "0.0.0.0";
  return same_host(b, any);
}

// What to do about a bind() or listen() failure, by errno. `own`: where the agent listens now (a
// reload), if it does.
std::string bind_advice(int err, const BindAddress& b, const BindAddress* own) {
  switch (err) {
    case EADDRINUSE:
      // Linux refuses a bind that overlaps a listening socket on the same port (0.0.0.0:P while
      // 127.0.0.1:P listens), and SO_REUSEPORT, which would allow it, would also let a second
      // agent share the port unnoticed: the move needs the old socket closed first.
      if (own && own->port == b.port && own->ipv6 == b.ipv6 &&
          (is_wildcard(*own) || is_wildcard(b) || same_host(*own, b)))
        return "the agent itself listens on " + own->str() +
               "; moving to an overlapping address on the same port takes a restart";
      return "another process is using the port; stop it or choose another port in [http] bind";
    case EADDRNOTAVAIL:
      return b.host +
             " is not an address of this machine; use one of its addresses, 127.0.0.1 (this "
             "machine only) or 0.0.0.0 (every interface) in [http] bind";
    case EACCES:
      return "ports below 1024 need root or CAP_NET_BIND_SERVICE; use a port from 1024 up in "
             "[http] bind";
    case EAFNOSUPPORT:
      return "this machine has no IPv6; use an IPv4 address in [http] bind";
    default:
      return "see [http] bind";
  }
}

}  // namespace

bool same_host(const BindAddress& a, const BindAddress& b) {
  if (a.ipv6 != b.ipv6) return false;
  sockaddr_storage x, y;
  socket_address(a, x);
  socket_address(b, y);
  if (a.ipv6)
    return std::memcmp(&reinterpret_cast<sockaddr_in6*>(&x)->sin6_addr,
                       &reinterpret_cast<sockaddr_in6*>(&y)->sin6_addr, sizeof(in6_addr)) == 0;
  return reinterpret_cast<sockaddr_in*>(&x)->sin_addr.s_addr ==
         reinterpret_cast<sockaddr_in*>(&y)->sin_addr.s_addr;
}

int open_listener(const BindAddress& b, const BindAddress* own) {
  sockaddr_storage addr;
  const socklen_t len = socket_address(b, addr);
  int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  auto fail = [&](const char* what) -> int {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot listen on " + b.str() + ": " + what + ": " +
                             std::strerror(err) + " (" + bind_advice(err, b, own) + ")");
  };
  if (fd < 0) return fail("socket");
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (b.ipv6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) return fail("bind");
  if (::listen(fd, SOMAXCONN) != 0) return fail("listen");
  return fd;
}

std::uint16_t bound_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

std::string address_text(const sockaddr* sa) {
  if (!sa) return {};
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  else if (sa->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  return buf;
}

std::pair<std::string, std::uint16_t> local_address_of(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return {};
  char buf[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    return {buf, ntohs(a->sin_port)};
  }
  if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    return {buf, ntohs(a->sin6_port)};
  }
  return {};
}

void ensure_descriptors(std::uint64_t max_connections, Logger& log) {
  const rlim_t need = 2 * static_cast<rlim_t>(max_connections) + 256;
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= need) return;
  const rlim_t before = lim.rlim_cur;
  lim.rlim_cur = std::min(need, lim.rlim_max);
  if (lim.rlim_cur > before && ::setrlimit(RLIMIT_NOFILE, &lim) != 0) lim.rlim_cur = before;
  if (lim.rlim_cur < need)
    log.warn("http: max_connections " + std::to_string(max_connections) + " needs about " +
             std::to_string(need) + " file descriptors and the limit (RLIMIT_NOFILE) is " +
             std::to_string(lim.rlim_cur) +
             "; past it new connections wait for a free one (systemd: LimitNOFILE=)");
  else
    log.info("http: raised the open-file limit from " + std::to_string(before) + " to " +
             std::to_string(lim.rlim_cur) + " for max_connections " +
             std::to_string(max_connections));
}

}  // namespace kiwi::agent::http
