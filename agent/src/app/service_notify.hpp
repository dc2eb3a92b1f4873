// systemd's service notification protocol (sd_notify(3)), without libsystemd: a datagram of
// "KEY=VALUE" lines to the AF_UNIX socket named by $NOTIFY_SOCKET. The unit (Type=notify,
// WatchdogSec=) sets the variables; outside systemd none is set and every call does nothing.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <string>
#include <string_view>

#include "base/duration.hpp"

namespace kiwi::agent {

class ServiceNotifier {
 public:
  // Reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID, then removes them from the environment,
  // so that programs the agent starts do not speak to systemd in its name. Call it before any
  // other thread starts (it changes the environment).
  static ServiceNotifier from_environment();

  ServiceNotifier() = default;
  ~ServiceNotifier();
  ServiceNotifier(ServiceNotifier&& other) noexcept;
  ServiceNotifier& operator=(ServiceNotifier&& other) noexcept;

  bool enabled() const { return fd_ >= 0; }
  // How often to ping the watchdog: half of WATCHDOG_USEC when it is set for this process, else 0.
  Millis watchdog_every() const { return watchdog_every_; }

  // "READY=1": the agent serves (its port is open; also the end of a reload).
  void ready(std::string_view status) const;
  // "RELOADING=1" with MONOTONIC_USEC (as Type=notify-reload wants it): a reload has begun; the
  // next ready() ends it, whether the reload succeeded or not.
  void reloading() const;
  // "STOPPING=1": shutting down.
  void stopping() const;
  // "WATCHDOG=1": the collector is alive.
  void watchdog() const;
  // Sends `message` ("KEY=VALUE\n..."); false if it could not be sent (never throws).
  bool send(std::string_view message) const;

 private:
  int fd_ = -1;
  sockaddr_un address_{};
  socklen_t address_length_ = 0;
  Millis watchdog_every_{0};
};

}  // namespace kiwi::agent
