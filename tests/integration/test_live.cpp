// Live cross-check on the machine running the tests: the real agent with its default sensors,
// compared with what the kernel and the usual tools say right now (/proc/meminfo, df, the number
// of online CPUs, a busy loop of our own on one core).
#include <pthread.h>
#include <rapidjson/document.h>
#include <sched.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <optional>

#include "harness.hpp"

using namespace kiwi_test;
using namespace std::chrono_literals;

namespace {

rapidjson::Document current(HttpClient& c) {
  const auto r = c.get("/api/current");
  rapidjson::Document d;
  d.Parse(r.body.c_str(), r.body.size());
  INFO(r.body);
  REQUIRE_FALSE(d.HasParseError());
  return d;
}

// The value of `name` (with one label `label` = `value`, or none) in the latest sample.
std::optional<double> metric(const rapidjson::Document& d, const std::string& name,
                             const std::string& label = "", const std::string& value = "") {
  for (const auto& sensor : d["sensors"].GetObject())
    for (const auto& m : sensor.value["metrics"].GetArray()) {
      if (name != m["name"].GetString()) continue;
      if (label.empty() && !m.HasMember("labels")) return m["value"].GetDouble();
      if (!label.empty() && m.HasMember("labels") && m["labels"].HasMember(label.c_str()) &&
          value == m["labels"][label.c_str()].GetString())
        return m["value"].GetDouble();
    }
  return std::nullopt;
}

std::size_t series_count(const rapidjson::Document& d, const std::string& name) {
  std::size_t n = 0;
  for (const auto& sensor : d["sensors"].GetObject())
    for (const auto& m : sensor.value["metrics"].GetArray()) n += name == m["name"].GetString();
  return n;
}

std::string run(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  pclose(p);
  return out;
}

// The agent with the default sensors, except that storage reports "/" whatever its filesystem type
// (an overlay root in a container is excluded by default).
const char* kSensors =
    "[[sensor]]\nplugin = \"cpu\"\n[[sensor]]\nplugin = \"memory\"\n"
    "[[sensor]]\nplugin = \"storage\"\n[sensor.options]\nexclude_types = []\n"
    "include_mounts = [\"/\"]\nexclude_mounts = [\"/proc\", \"/sys\", \"/dev\"]\n"
    "[[sensor]]\nplugin = \"network\"\n[[sensor]]\nplugin = \"diskio\"\n";

}  // namespace

TEST_CASE("live: total memory is MemTotal from /proc/meminfo, in bytes") {
  Agent agent(kSensors);
  HttpClient c(agent.port());
  const auto d = current(c);
  std::uint64_t mem_total_kib = 0;
  std::istringstream meminfo(read_text("/proc/meminfo"));
  for (std::string key; meminfo >> key;)
    if (key == "MemTotal:") meminfo >> mem_total_kib;
  REQUIRE(mem_total_kib > 0);
  CHECK(metric(d, "memory_total_bytes") == static_cast<double>(mem_total_kib) * 1024);
}

TEST_CASE("live: size and available bytes of / match df -B1 / within 1%") {
  Agent agent(kSensors);
  HttpClient c(agent.port());
  const auto d = current(c);
  std::istringstream df(run("df -B1 --output=size,avail / | tail -n 1"));
  double df_size = 0, df_avail = 0;
  REQUIRE(df >> df_size >> df_avail);
  const auto size = metric(d, "storage_size_bytes", "mount", "/");
  const auto avail = metric(d, "storage_available_bytes", "mount", "/");
  INFO("df: size " << df_size << " available " << df_avail);
  REQUIRE(size);
  REQUIRE(avail);
  CHECK(std::fabs(*size - df_size) <= 0.01 * df_size);
  // Available space moves while the tests write; 1% of the size is the tolerance df users expect.
  CHECK(std::fabs(*avail - df_avail) <= 0.01 * df_size);
}

TEST_CASE("live: one core usage series per online CPU, and network and diskio report") {
  Agent agent(kSensors);
  HttpClient c(agent.port());
  rapidjson::Document d;
  REQUIRE(eventually(
      [&] {  // ratios need a second reading
        d = current(c);
        return series_count(d, "cpu_core_usage_ratio") > 0;
      },
      10s));
  CHECK(series_count(d, "cpu_core_usage_ratio") ==
        static_cast<std::size_t>(sysconf(_SC_NPROCESSORS_ONLN)));
  for (const char* sensor : {"network", "diskio"}) {
    INFO(sensor << ": " << d["sensors"][sensor]["status"].GetString());
    CHECK(std::string(d["sensors"][sensor]["status"].GetString()) != "error");
  }
  // The default network options leave out lo and nothing else.
  CHECK_FALSE(metric(d, "network_receive_bytes_per_second", "interface", "lo"));
}

TEST_CASE("live: a busy loop pinned to one core reads as that core fully busy") {
  // The core to load: the first one this process may run on (CPU 0 unless a cpuset says no).
  cpu_set_t allowed;
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  int core = 0;
  while (core < CPU_SETSIZE && !CPU_ISSET(core, &allowed)) ++core;
  REQUIRE(core < CPU_SETSIZE);
  const auto online = static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN));

  Agent agent(kSensors);
  HttpClient c(agent.port());
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    // Bounded: at most 10 s even if the test fails before it says stop.
    const auto deadline = Clock::now() + 10s;
    while (!stop.load(std::memory_order_relaxed) && Clock::now() < deadline) {
    }
  });
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(core, &one);
  const int pinned = pthread_setaffinity_np(busy.native_handle(), sizeof one, &one);
  struct Join {
    std::atomic<bool>& stop;
    std::thread& t;
    ~Join() {
      stop = true;
      t.join();
    }
  } join{stop, busy};
  REQUIRE(pinned == 0);

  // A sample whose whole interval the loop ran through: two ticks after it started.
  const std::uint64_t start = current(c)["sequence"].GetUint64();
  rapidjson::Document d;
  REQUIRE(eventually(
      [&] {
        d = current(c);
        return d["sequence"].GetUint64() >= start + 2;
      },
      8s));
  const auto core_usage = metric(d, "cpu_core_usage_ratio", "core", std::to_string(core));
  const auto total_usage = metric(d, "cpu_usage_ratio");
  INFO("core " << core << " of " << online);
  REQUIRE(core_usage);
  REQUIRE(total_usage);
  // Expected: the core is 100% busy (other work on it only adds to that), and the machine at least
  // 1/N busy. Within 10 points of each.
  CHECK(*core_usage >= 0.9);
  CHECK(*total_usage >= 1.0 / online - 0.1);
}

TEST_CASE("live: the kernel's counters are in /metrics as counters and never go down") {
  Agent agent(
      "[[sensor]]\nplugin = \"cpu\"\n[[sensor]]\nplugin = \"diskio\"\n"
      "[[sensor]]\nplugin = \"network\"\n[sensor.options]\nexclude = []\n");  // with lo
  HttpClient c(agent.port());
  // Every kiwi_*_total series of the sensors, by its whole series text, and the TYPE lines.
  auto scrape = [&] {
    std::map<std::string, double> out;
    const auto r = c.get("/metrics");
    REQUIRE(r.status == 200);
    std::istringstream lines(r.body);
    for (std::string line; std::getline(lines, line);) {
      if (line.empty() || line[0] == '#') continue;
      const auto space = line.rfind(' ');
      const std::string series = line.substr(0, space);
      const std::string name = series.substr(0, series.find('{'));
      if (!name.ends_with("_total") || name.starts_with("kiwi_sensor_") ||
          !(name.starts_with("kiwi_cpu_") || name.starts_with("kiwi_network_") ||
            name.starts_with("kiwi_diskio_")))
        continue;
      out[series] = std::stod(line.substr(space + 1));
    }
    CHECK_THAT(r.body, Catch::Contains("# TYPE kiwi_cpu_seconds_total counter"));
    CHECK_THAT(r.body, Catch::Contains("# TYPE kiwi_network_receive_bytes_total counter"));
    CHECK_THAT(r.body, Catch::Contains("# TYPE kiwi_diskio_io_time_seconds_total counter"));
    return out;
  };
  const auto before = scrape();
  REQUIRE(before.count("kiwi_cpu_seconds_total{mode=\"idle\"}"));
  REQUIRE(before.count("kiwi_network_receive_bytes_total{interface=\"lo\"}"));
  // Some traffic on lo and a few ticks.
  const auto until = Clock::now() + 2500ms;
  while (Clock::now() < until) {
    c.get("/api/current");
    std::this_thread::sleep_for(50ms);
  }
  const auto after = scrape();
  std::size_t compared = 0;
  for (const auto& [series, value] : before) {
    auto later = after.find(series);
    if (later == after.end()) continue;  // a device gone between the scrapes
    INFO(series << ": " << value << " then " << later->second);
    CHECK(later->second >= value);
    ++compared;
  }
  CHECK(compared >= before.size() * 9 / 10);
  CHECK(after.at("kiwi_network_receive_bytes_total{interface=\"lo\"}") >
        before.at("kiwi_network_receive_bytes_total{interface=\"lo\"}"));
  CHECK(after.at("kiwi_cpu_seconds_total{mode=\"idle\"}") +
            after.at("kiwi_cpu_seconds_total{mode=\"user\"}") >
        before.at("kiwi_cpu_seconds_total{mode=\"idle\"}") +
            before.at("kiwi_cpu_seconds_total{mode=\"user\"}"));
}
