// A real Prometheus (Debian's prometheus package, 2.42) for the integration tests: its own data
// directory and a free loopback port, started and stopped by its PID, its HTTP API read as JSON.
#pragma once

#include <rapidjson/document.h>
#include <signal.h>

#include <cctype>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness.hpp"

namespace kiwi_test {

// A GET answered with JSON; an empty object when nothing answers or the body is not JSON.
inline rapidjson::Document get_json(int port, const std::string& target) {
  rapidjson::Document d;
  try {
    HttpClient c(port);
    auto r = c.get(target);
    d.Parse(r.body.c_str(), r.body.size());
  } catch (const std::exception&) {
    d.SetObject();
  }
  if (d.HasParseError() || !d.IsObject()) d.SetObject();
  return d;
}

// `s` percent-encoded for a query parameter (PromQL has braces, quotes and brackets).
inline std::string url_encode(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '_' || c == '.' || c == '-') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

struct Prometheus : TestServer {
  std::vector<std::string> flags;
  // Starts it on `config` (prometheus.yml's text) with `extra` flags, and waits until it is ready.
  explicit Prometheus(const std::string& config, std::vector<std::string> extra = {})
      : flags(std::move(extra)) {
    write_text(dir.path / "prometheus.yml", config);
    start();
  }

  // Starts it and waits until it is ready (start_server: another port when the chosen one was
  // taken, a minute for a slow start).
  void start() {
    start_server(
        "Prometheus", process, port,
        [&](int p) {
          std::vector<std::string> argv = {
              "/usr/bin/prometheus", "--config.file=" + (dir.path / "prometheus.yml").string(),
              "--storage.tsdb.path=" + (dir.path / "data").string(),
              "--web.listen-address=127.0.0.1:" + std::to_string(p)};
          argv.insert(argv.end(), flags.begin(), flags.end());
          return argv;
        },
        dir.path / "out", dir.path / "err", [&] { return ready(); },
        [&] {
          const std::string log = read_text(dir.path / "err");
          return log.substr(log.size() > 2000 ? log.size() - 2000 : 0);
        });
  }
  void stop() { process.stop(SIGTERM, std::chrono::seconds(20)); }
  bool ready() {
    try {
      HttpClient c(port);
      return c.get("/-/ready").status == 200;
    } catch (const std::exception&) {
      return false;
    }
  }

  // GET on its API; an empty object until it answers.
  rapidjson::Document api(const std::string& target) { return get_json(port, target); }
  // An instant query's results: each series' labels and value (at unix time `at`, 0: now).
  std::vector<std::pair<std::map<std::string, std::string>, double>> query(const std::string& q,
                                                                           double at = 0) {
    auto d =
        api("/api/v1/query?query=" + url_encode(q) + (at > 0 ? "&time=" + std::to_string(at) : ""));
    std::vector<std::pair<std::map<std::string, std::string>, double>> out;
    if (!d.HasMember("data")) return out;
    for (auto& r : d["data"]["result"].GetArray()) {
      std::map<std::string, std::string> labels;
      for (auto& m : r["metric"].GetObject()) labels[m.name.GetString()] = m.value.GetString();
      out.emplace_back(labels, std::stod(r["value"][1].GetString()));
    }
    return out;
  }
  // Where remote write goes (with --web.enable-remote-write-receiver).
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port) + "/api/v1/write"; }
};

}  // namespace kiwi_test
