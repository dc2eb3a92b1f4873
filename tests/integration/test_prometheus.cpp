// A real Prometheus (Debian's prometheus package) scraping two agents through file_sd.
#include <rapidjson/document.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>

#include "harness.hpp"
#include "prometheus.hpp"

using namespace kiwi_test;
using namespace std::chrono_literals;

namespace {

// Prometheus scraping every 1 s the agents listed in a file_sd targets file.
struct ScrapingPrometheus {
  TempDir targets;
  Prometheus server;
  explicit ScrapingPrometheus(const std::string& targets_json)
      : server((write_text(targets.path / "targets.json", targets_json),
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
                "scrape_configs:\n  - job_name: kiwi\n    file_sd_configs:\n"
                "      - files: [" +
                    (targets.path / "targets.json").string() +
                    "]\n        refresh_interval: 1s\n")) {}
  rapidjson::Document api(const std::string& target) { return server.api(target); }
  // Health of the target scraping `port` ("up", "down", "unknown" or "" if not listed yet).
  std::string health(int agent_port) {
    auto d = api("/api/v1/targets");
    if (!d.HasMember("data")) return "";
    for (auto& t : d["data"]["activeTargets"].GetArray())
      if (std::string(t["scrapeUrl"].GetString()).find(":" + std::to_string(agent_port) + "/") !=
          std::string::npos)
        return t["health"].GetString();
    return "";
  }
};

}  // namespace

TEST_CASE("prometheus: scrapes two agents with their labels and sees one go down", "[slow]") {
  Agent a, b;
  ScrapingPrometheus prom(R"([{"targets":["127.0.0.1:)" + std::to_string(a.port()) +
                          R"("],"labels":{"board":"kiwipi-a"}},{"targets":["127.0.0.1:)" +
                          std::to_string(b.port()) + R"("],"labels":{"board":"kiwipi-b"}}])");
  INFO(read_text(prom.server.dir.path / "err").substr(0, 2000));
  REQUIRE(eventually([&] { return prom.health(a.port()) == "up" && prom.health(b.port()) == "up"; },
                     40s));

  // One series per agent, carrying the file_sd labels.
  std::vector<std::string> boards;
  REQUIRE(eventually(
      [&] {
        auto d = prom.api("/api/v1/query?query=kiwi_cpu_usage_ratio");
        boards.clear();
        if (!d.HasMember("data")) return false;
        for (auto& r : d["data"]["result"].GetArray())
          boards.push_back(r["metric"]["board"].GetString());
        std::sort(boards.begin(), boards.end());
        return boards.size() == 2;
      },
      20s));
  CHECK(boards == std::vector<std::string>{"kiwipi-a", "kiwipi-b"});

  CHECK(b.stop() == 0);
  CHECK(eventually([&] { return prom.health(b.port()) == "down"; }, 20s));
  CHECK(prom.health(a.port()) == "up");
}
