// A real Prometheus (Debian's prometheus package) scraping two agents through file_sd.
#include <rapidjson/document.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>

#include "harness.hpp"

using namespace kiwi_test;
using namespace std::chrono_literals;

namespace {

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

struct Prometheus {
  TempDir dir;
  int port = free_port();
  pid_t pid = -1;
  explicit Prometheus(const std::string& targets_json) {
    write_text(dir.path / "targets.json", targets_json);
    write_text(dir.path / "prometheus.yml",
               "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
               "scrape_configs:\n  - job_name: kiwi\n    file_sd_configs:\n"
               "      - files: [" +
                   (dir.path / "targets.json").string() + "]\n        refresh_interval: 1s\n");
    pid = spawn({"/usr/bin/prometheus", "--config.file=" + (dir.path / "prometheus.yml").string(),
                 "--storage.tsdb.path=" + (dir.path / "data").string(),
                 "--web.listen-address=127.0.0.1:" + std::to_string(port)},
                dir.path / "out", dir.path / "err");
  }
  ~Prometheus() {
    kill(pid, SIGTERM);
    try {
      wait_exit(pid, 20s);
    } catch (...) {
    }
  }
  // GET on the Prometheus API; empty document until it answers.
  rapidjson::Document api(const std::string& target) {
    rapidjson::Document d;
    try {
      HttpClient c(port);
      auto r = c.get(target);
      d.Parse(r.body.c_str(), r.body.size());
    } catch (const std::exception&) {
      d.SetObject();
    }
    if (d.HasParseError()) d.SetObject();
    return d;
  }
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

TEST_CASE("prometheus: scrapes two agents with their labels and sees one go down") {
  Agent a, b;
  Prometheus prom(R"([{"targets":["127.0.0.1:)" + std::to_string(a.port()) +
                  R"("],"labels":{"board":"kiwipi-a"}},{"targets":["127.0.0.1:)" +
                  std::to_string(b.port()) + R"("],"labels":{"board":"kiwipi-b"}}])");
  INFO(read_text(prom.dir.path / "err").substr(0, 2000));
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
