// A real Prometheus (Debian's prometheus package) scraping two agents through file_sd.
#include <rapidjson/document.h>
#include <sys/socket.h>
#include <sys/stat.h>

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

TEST_CASE("prometheus: a histogram relayed by exec answers histogram_quantile()", "[slow]") {
  // Flattened into counters (kiwi_rpc_seconds_bucket_total) it found nothing (issue 36, item 2).
  TempDir dir;
  const auto relay = dir.path / "relay.sh";
  write_text(relay, R"(#!/bin/sh
cat <<'END'
# HELP rpc_seconds How long an RPC took.
# TYPE rpc_seconds histogram
rpc_seconds_bucket{le="0.1"} 1
rpc_seconds_bucket{le="0.5"} 3
rpc_seconds_bucket{le="+Inf"} 4
rpc_seconds_sum 1.2
rpc_seconds_count 4
END
)");
  ::chmod(relay.c_str(), 0755);
  Agent agent("[[sensor]]\nplugin = \"exec\"\nname = \"rpc\"\n[sensor.options]\ncommand = [\"" +
              relay.string() + "\"]\n");
  ScrapingPrometheus prom(R"([{"targets":["127.0.0.1:)" + std::to_string(agent.port()) + R"("]}])");
  INFO(read_text(prom.server.dir.path / "err").substr(0, 2000));
  // The median: the second of four observations, in the bucket (0.1, 0.5] holding the second and
  // third, so Prometheus interpolates 0.1 + 0.4 x (2 - 1) / (3 - 1) = 0.3.
  double median = 0;
  REQUIRE(eventually(
      [&] {
        auto d = prom.api("/api/v1/query?query=" +
                          url_encode("histogram_quantile(0.5, kiwi_rpc_seconds_bucket)"));
        if (!d.HasMember("data") || d["data"]["result"].Empty()) return false;
        median = std::stod(d["data"]["result"][0]["value"][1].GetString());
        return true;
      },
      40s));
  CHECK(median == Approx(0.3));
  auto meta = prom.api("/api/v1/metadata?metric=kiwi_rpc_seconds");
  REQUIRE(meta.HasMember("data"));
  REQUIRE(meta["data"].HasMember("kiwi_rpc_seconds"));
  CHECK(meta["data"]["kiwi_rpc_seconds"][0]["type"].GetString() == std::string("histogram"));
  CHECK(meta["data"]["kiwi_rpc_seconds"][0]["help"].GetString() ==
        std::string("How long an RPC took."));
}
