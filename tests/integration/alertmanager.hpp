// A real Alertmanager (Debian's prometheus-alertmanager, 0.25) for the integration tests: its own
// storage directory, a free loopback port, clustering off (no listener on 0.0.0.0:9094), started
// and stopped by its PID, its API read as JSON. Its configuration is the test's.
#pragma once

#include <rapidjson/document.h>
#include <signal.h>

#include <sstream>
#include <string>

#include "harness.hpp"

namespace kiwi_test {

inline constexpr const char* kAlertmanagerBin = "/usr/bin/prometheus-alertmanager";

struct Alertmanager : TestServer {
  // Starts it on `config` (alertmanager.yml's text) and waits until it is ready. A missing binary
  // fails the test: tools/setup.sh --test installs it.
  explicit Alertmanager(const std::string& config) {
    if (!fs::exists(kAlertmanagerBin))
      FAIL(kAlertmanagerBin << " is missing: tools/setup.sh --test installs "
                               "prometheus-alertmanager");
    write_text(dir.path / "alertmanager.yml", config);
    start();
  }

  // Starts it and waits until /-/ready answers (start_server: another port when the chosen one
  // was taken, a minute for a slow start).
  void start() {
    start_server(
        "Alertmanager", process, port,
        [&](int p) {
          return std::vector<std::string>{
              kAlertmanagerBin,
              "--config.file=" + (dir.path / "alertmanager.yml").string(),
              "--storage.path=" + (dir.path / "data").string(),
              "--web.listen-address=127.0.0.1:" + std::to_string(p),
              "--cluster.listen-address=",
              "--log.level=debug"};
        },
        dir.path / "out", dir.path / "err", [&] { return ready(); }, [&] { return log_tail(); });
  }
  bool ready() {
    try {
      HttpClient c(port);
      return c.get("/-/ready").status == 200;
    } catch (const std::exception&) {
      return false;
    }
  }
  // The end of its log, without the debug lines of its groups' flushes (one a second).
  std::string log_tail() const {
    std::istringstream in(read_text(dir.path / "err"));
    std::string log, line;
    while (std::getline(in, line))
      if (line.find("msg=flushing") == std::string::npos) log += line + "\n";
    return log.substr(log.size() > 3000 ? log.size() - 3000 : 0);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
  // GET on its API as JSON: an array for /api/v2/alerts; null when nothing answers.
  rapidjson::Document api(const std::string& target) {
    rapidjson::Document d;
    try {
      HttpClient c(port);
      const auto r = c.get(target);
      d.Parse(r.body.c_str(), r.body.size());
    } catch (const std::exception&) {
      d.SetNull();
    }
    if (d.HasParseError()) d.SetNull();
    return d;
  }
};

}  // namespace kiwi_test
