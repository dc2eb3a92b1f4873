// The agent as a systemd service (config/kiwi-agent.service.in: Type=notify, WatchdogSec=): the
// real binary speaks sd_notify(3)'s datagram protocol to a socket the test binds where systemd's
// would be, as NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID say.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "checks.hpp"

using namespace kiwi_test;
using namespace std::chrono_literals;

namespace {

// A datagram socket in systemd's place: a path, or "@name" in the abstract namespace.
class NotifySocket {
 public:
  explicit NotifySocket(std::string name) : name_(std::move(name)) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    REQUIRE(name_.size() < sizeof a.sun_path);
    std::memcpy(a.sun_path, name_.data(), name_.size());
    if (name_[0] == '@') a.sun_path[0] = '\0';
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name_.size());
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&a), len) == 0);
    setenv("NOTIFY_SOCKET", name_.c_str(), 1);  // each test case runs in its own process
  }
  ~NotifySocket() {
    close(fd_);
    if (name_[0] == '/') unlink(name_.c_str());
  }

  // The next message, or "" if none comes within `timeout`.
  std::string receive(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) != 1) return "";
    char buf[4096];
    auto n = recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
  }
  // Messages until one contains `what` (returned), or "" after `timeout`.
  std::string wait_for(const std::string& what, std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      auto m =
          receive(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
      if (m.find(what) != std::string::npos) return m;
    }
    return "";
  }
  // The times WATCHDOG=1 arrived during `window`.
  std::vector<Clock::time_point> pings_during(std::chrono::milliseconds window) {
    std::vector<Clock::time_point> at;
    auto deadline = Clock::now() + window;
    while (Clock::now() < deadline) {
      auto m =
          receive(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
      if (m == "WATCHDOG=1") at.push_back(Clock::now());
    }
    return at;
  }

 private:
  std::string name_;
  int fd_ = -1;
};

const std::string kHangingSensor = "[[sensor]]\nplugin = \"" KIWI_TEST_PLUGIN_DIR
                                   "/test-slow_sensor.so\"\nname = \"hang\"\n"
                                   "[sensor.options]\nsleep_ms = -1\n";

}  // namespace

TEST_CASE("service: READY=1 once the port is open, RELOADING=1 and READY=1 around a reload") {
  TempDir dir;
  auto name = GENERATE(as<std::string>{}, "path", "@abstract");
  NotifySocket notify(name == "path" ? (dir.path / "notify").string()
                                     : "@kiwi-test-" + std::to_string(getpid()));
  Agent agent;
  auto ready = notify.wait_for("READY=1", 10s);
  REQUIRE(!ready.empty());
  CHECK_THAT(ready, Catch::Contains(
                        "STATUS=serving http://127.0.0.1:" + std::to_string(agent.port()) + "/"));
  // What READY promised: the port answers (the first sample follows within half an interval).
  HttpClient c(agent.port());
  CHECK(c.get("/api/health").status != 0);
  CHECK(eventually([&] { return sequence_of(c) >= 1; }, 5s));
  // No watchdog was asked for (WATCHDOG_USEC unset): no pings.
  CHECK(notify.pings_during(1500ms).empty());
  // A reload: RELOADING=1 with the monotonic time systemd asks for, then READY=1 again.
  agent.write_config("", "interval = \"2s\"");
  kill(agent.pid(), SIGHUP);
  auto reloading = notify.wait_for("RELOADING=1", 10s);
  CHECK_THAT(reloading, Catch::Contains("MONOTONIC_USEC="));
  CHECK_THAT(notify.wait_for("READY=1", 10s), Catch::Contains("STATUS=serving"));
  // SIGTERM: STOPPING=1, then a clean exit.
  kill(agent.pid(), SIGTERM);
  CHECK_THAT(notify.wait_for("STOPPING=1", 10s), Catch::Contains("STOPPING=1"));
  CHECK(agent.stop(SIGTERM) == 0);
}

TEST_CASE(
    "service: without NOTIFY_SOCKET, or with one that is not systemd's, the agent just runs") {
  auto value = GENERATE(as<std::string>{}, "", "relative/socket", "/nonexistent/dir/socket");
  if (value.empty())
    unsetenv("NOTIFY_SOCKET");
  else
    setenv("NOTIFY_SOCKET", value.c_str(), 1);
  setenv("WATCHDOG_USEC", "100000", 1);
  Agent agent;
  HttpClient c(agent.port());
  REQUIRE(eventually([&] { return sequence_of(c) >= 2; }, 10s));
  CHECK(agent.stop(SIGTERM) == 0);
}

TEST_CASE("service: the collector pings the watchdog at half its period") {
  TempDir dir;
  NotifySocket notify((dir.path / "notify").string());
  setenv("WATCHDOG_USEC", "200000", 1);  // 0.2 s: a ping every 0.1 s, between ticks too
  Agent agent;
  REQUIRE(!notify.wait_for("READY=1", 10s).empty());
  // About 20 in 2 s; a loaded machine may delay some, not most.
  CHECK(notify.pings_during(2000ms).size() >= 8);
  CHECK(agent.stop(SIGTERM) == 0);
}

TEST_CASE("service: WATCHDOG_PID naming another process leaves the watchdog alone") {
  TempDir dir;
  NotifySocket notify((dir.path / "notify").string());
  setenv("WATCHDOG_USEC", "200000", 1);
  setenv("WATCHDOG_PID", "1", 1);  // systemd's watchdog is for pid 1, not the agent
  Agent agent;
  REQUIRE(!notify.wait_for("READY=1", 10s).empty());
  CHECK(notify.pings_during(1500ms).empty());
  CHECK(agent.stop(SIGTERM) == 0);
}

TEST_CASE("service: a hung sensor is timed out and the watchdog pings go on", "[slow]") {
  TempDir dir;
  NotifySocket notify((dir.path / "notify").string());
  setenv("WATCHDOG_USEC", "400000", 1);  // a ping every 0.2 s while the collector is alive
  Agent agent(kHangingSensor);
  REQUIRE(!notify.wait_for("READY=1", 20s).empty());
  auto pings = notify.pings_during(3000ms);
  CHECK(pings.size() >= 6);
  HttpClient c(agent.port());
  CHECK_THAT(c.get("/api/health").body, Catch::Contains("sensor hang: timed out after 1s"));
  CHECK(agent.stop(SIGTERM) == 0);
}

TEST_CASE(
    "service: a collector that stops ticking stops the watchdog pings, so systemd restarts the "
    "agent",
    "[slow]") {
  TempDir dir;
  NotifySocket notify((dir.path / "notify").string());
  setenv("WATCHDOG_USEC", "400000", 1);
  Agent agent;
  REQUIRE(!notify.wait_for("READY=1", 20s).empty());
  REQUIRE(notify.pings_during(1000ms).size() >= 2);
  FrozenThread frozen(agent.pid(), "kiwi-collector");  // as a stuck disk would stop it
  const auto from = Clock::now();
  auto pings = notify.pings_during(3000ms);
  auto silence = Clock::now() - (pings.empty() ? from : pings.back());
  for (std::size_t i = 1; i < pings.size(); ++i)
    silence = std::max(silence, pings[i] - pings[i - 1]);
  // Silent for at least 2 s: five watchdog periods, where systemd would have sent SIGABRT.
  CHECK(silence >= 2s);
}
