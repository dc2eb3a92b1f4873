#include "app/service_notify.hpp"

#include <ctime>

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace kiwi::agent {

ServiceNotifier ServiceNotifier::from_environment() {
  ServiceNotifier n;
  const char* socket_name = std::getenv("NOTIFY_SOCKET");
  const char* watchdog_usec = std::getenv("WATCHDOG_USEC");
  const char* watchdog_pid = std::getenv("WATCHDOG_PID");
  const std::string name = socket_name ? socket_name : "";
  // The watchdog is this process's only if WATCHDOG_PID is unset or names it (sd_watchdog_enabled).
  long long usec = watchdog_usec ? std::atoll(watchdog_usec) : 0;
  if (watchdog_pid && std::atoll(watchdog_pid) != static_cast<long long>(::getpid())) usec = 0;
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
  ::unsetenv("WATCHDOG_PID");

  // An absolute path, or "@name" for the abstract namespace; anything else is not systemd's.
  if (name.empty() || (name[0] != '/' && name[0] != '@') ||
      name.size() >= sizeof n.address_.sun_path)
    return n;
  n.address_.sun_family = AF_UNIX;
  std::memcpy(n.address_.sun_path, name.data(), name.size());
  if (name[0] == '@') n.address_.sun_path[0] = '\0';
  n.address_length_ = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() +
                                             (name[0] == '/' ? 1 : 0));
  n.fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (n.fd_ >= 0 && usec > 0) n.watchdog_every_ = Millis(std::max<long long>(1, usec / 2000));
  return n;
}

ServiceNotifier::~ServiceNotifier() {
  if (fd_ >= 0) ::close(fd_);
}

ServiceNotifier::ServiceNotifier(ServiceNotifier&& other) noexcept {
  *this = std::move(other);
}

ServiceNotifier& ServiceNotifier::operator=(ServiceNotifier&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    address_ = other.address_;
    address_length_ = other.address_length_;
    watchdog_every_ = other.watchdog_every_;
  }
  return *this;
}

bool ServiceNotifier::send(std::string_view message) const {
  if (fd_ < 0) return false;
  const auto sent = ::sendto(fd_, message.data(), message.size(), MSG_NOSIGNAL,
                             reinterpret_cast<const sockaddr*>(&address_), address_length_);
  return sent == static_cast<ssize_t>(message.size());
}

void ServiceNotifier::ready(std::string_view status) const {
  send("READY=1\nSTATUS=" + std::string(status));
}

void ServiceNotifier::reloading() const {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  const auto usec = static_cast<std::uint64_t>(now.tv_sec) * 1'000'000u +
                    static_cast<std::uint64_t>(now.tv_nsec) / 1000u;
  send("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(usec) + "\nSTATUS=reloading");
}

void ServiceNotifier::stopping() const {
  send("STOPPING=1\nSTATUS=stopping");
}

void ServiceNotifier::watchdog() const {
  send("WATCHDOG=1");
}

}  // namespace kiwi::agent
