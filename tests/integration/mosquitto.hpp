// A real MQTT broker (Debian's mosquitto) for the integration tests: its own config file in a
// temporary directory (never the system's service), a free loopback port, started and stopped by
// its PID; read with mosquitto_sub, as Home Assistant's MQTT integration would read it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <string>

#include "checks.hpp"
#include "harness.hpp"

namespace kiwi_test {

inline constexpr const char* kMosquitto = "/usr/sbin/mosquitto";
inline constexpr const char* kMosquittoSub = "/usr/bin/mosquitto_sub";
inline constexpr const char* kMosquittoPub = "/usr/bin/mosquitto_pub";
inline constexpr const char* kMosquittoPasswd = "/usr/bin/mosquitto_passwd";

// Whether something accepts TCP connections on 127.0.0.1:`port`.
inline bool accepts(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

struct Mosquitto : TestServer {
  std::string user, password;  // a login it requires; anonymous when empty

  explicit Mosquitto(std::string login_user = "", std::string login_password = "")
      : user(std::move(login_user)), password(std::move(login_password)) {
    for (const char* program : {kMosquitto, kMosquittoSub, kMosquittoPub, kMosquittoPasswd})
      if (::access(program, X_OK) != 0)
        skip_test(std::string(program) +
                  " is missing (tools/setup.sh --test installs mosquitto and mosquitto-clients)");
    if (!user.empty()) {
      const auto [code, out] =
          run_shell(std::string(kMosquittoPasswd) + " -b -c '" + (dir.path / "passwd").string() +
                    "' '" + user + "' '" + password + "'");
      if (code != 0) FAIL("mosquitto_passwd: " << out);
    }
    start();
  }

  // Starts it (again, on the same port after stop(): start_server picks another only when the
  // port was taken, which the test then reports) and waits until it accepts connections.
  void start() {
    start_server(
        "mosquitto", process, port,
        [&](int p) {
          // As root it would switch to the user "mosquitto", who cannot read this directory.
          const passwd* me = ::getpwuid(::geteuid());
          write_text(dir.path / "mosquitto.conf",
                     "listener " + std::to_string(p) + " 127.0.0.1\n" +
                         "persistence false\nlog_dest stderr\nlog_type all\n" +
                         (me ? "user " + std::string(me->pw_name) + "\n" : "") +
                         (user.empty() ? "allow_anonymous true\n"
                                       : "allow_anonymous false\npassword_file " +
                                             (dir.path / "passwd").string() + "\n"));
          return std::vector<std::string>{kMosquitto, "-c", (dir.path / "mosquitto.conf").string()};
        },
        dir.path / "out", dir.path / "err", [&] { return accepts(port); },
        [&] {
          const std::string log = read_text(dir.path / "err");
          return log.substr(log.size() > 2000 ? log.size() - 2000 : 0);
        });
  }
  void stop() { process.stop(SIGTERM, std::chrono::seconds(20)); }

  std::string login() const {
    return user.empty() ? "" : " -u '" + user + "' -P '" + password + "'";
  }
  std::string url() const { return "mqtt://127.0.0.1:" + std::to_string(port); }
  std::string log() const { return read_text(dir.path / "err"); }

  // Publishes `payload` to `topic` (retained when `retain`; an empty retained payload clears the
  // topic's retained message), as another client would.
  void publish(const std::string& topic, const std::string& payload, bool retain) const {
    const auto [code, out] =
        run_shell(std::string(kMosquittoPub) + " -h 127.0.0.1 -p " + std::to_string(port) +
                  login() + (retain ? " -r" : "") + " -t '" + topic + "' " +
                  (payload.empty() ? "-n" : "-m '" + payload + "'"));
    if (code != 0) FAIL("mosquitto_pub: " << out);
  }

  // What a client that subscribes to `filter` now gets at once: the retained messages, topic ->
  // payload (mosquitto_sub --retained-only stops at the first live one, -W 1 after a second).
  std::map<std::string, std::string> retained(const std::string& filter) const {
    const auto [code, out] =
        run_shell(std::string(kMosquittoSub) + " -h 127.0.0.1 -p " + std::to_string(port) +
                  login() + " -t '" + filter + "' -v --retained-only -W 1");
    std::map<std::string, std::string> messages;
    for (std::string_view rest = out; !rest.empty();) {
      const auto end = rest.find('\n');
      const std::string_view line = rest.substr(0, end);
      rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
      const auto space = line.find(' ');
      if (space == std::string_view::npos || line.starts_with("Error") ||
          line.starts_with("Timed out"))
        continue;
      messages[std::string(line.substr(0, space))] = std::string(line.substr(space + 1));
    }
    return messages;
  }
};

}  // namespace kiwi_test
