// A real Alertmanager (Debian's prometheus-alertmanager, 0.25) for the integration tests: its own
// storage directory, a free loopback port, clustering off (no listener on 0.0.0.0:9094), started
// and stopped by its PID, its API read as JSON. Its configuration is the test's.
#pragma once

#include <rapidjson/document.h>
#include <signal.h>

#include <optional>
#include <sstream>
#include <string>

#include "harness.hpp"

namespace kiwi_test {

inline constexpr const char* kAlertmanagerBin = "/usr/bin/prometheus-alertmanager";

struct Alertmanager {
  TempDir dir;
  int port = free_port();
  Process process;  // dies with the test process (process.hpp)

  // Starts it on `config` (alertmanager.yml's text) and waits until it is ready. A missing binary
  // fails the test: tools/setup.sh --test installs it.
  explicit Alertmanager(const std::string& config) {
    if (!fs::exists(kAlertmanagerBin))
      FAIL(kAlertmanagerBin << " is missing: tools/setup.sh --test installs "
                               "prometheus-alertmanager");
    write_text(dir.path / "alertmanager.yml", config);
    start();
  }
  Alertmanager(const Alertmanager&) = delete;
  Alertmanager& operator=(const Alertmanager&) = delete;
  ~Alertmanager() {
    if (!process.started()) return;
    try {
      process.stop(SIGTERM, std::chrono::seconds(20));
    } catch (...) {
    }
  }

  // Starts it and waits until /-/ready answers; another listener that took the port first makes
  // it exit at once, and it is started again on another port (three tries).
  void start() {
    for (int attempt = 1;; ++attempt) {
      process =
          Process({kAlertmanagerBin, "--config.file=" + (dir.path / "alertmanager.yml").string(),
                   "--storage.path=" + (dir.path / "data").string(),
                   "--web.listen-address=127.0.0.1:" + std::to_string(port),
                   "--cluster.listen-address=", "--log.level=debug"},
                  {dir.path / "out", dir.path / "err", {}});
      std::optional<int> exited;
      if (eventually([&] { return (exited = process.poll()) || ready(); },
                     std::chrono::seconds(60)) &&
          !exited)
        return;
      INFO("Alertmanager on 127.0.0.1:" << port << " (attempt " << attempt
                                        << "), its log ends: " << log_tail());
      if (!exited || attempt == 3) FAIL("Alertmanager did not get ready");
      port = free_port();
    }
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
