// Micro-benchmarks of the hot pure functions (Catch2 BENCHMARK): what one tick costs in the
// parsers of the sensors' procfs tables (captured from an RK3588 board: tests/fixtures/rk3588),
// the sample codec and the blocks the store writes, and the Prometheus renderer on a snapshot the
// size of the default sensors'. Timings only, never asserted: a CHECK here checks that the
// function did its work (a parser that found nothing is not measured as fast).
// Built with the tests; run by hand for figures, and by tools/bench/run.sh --quick (so by
// tools/test.sh) with a few samples as a smoke test:
//   build/bin/kiwi-bench-micro                       # Catch2's default 100 samples each
//   build/bin/kiwi-bench-micro --benchmark-samples 3  # the smoke test
#define CATCH_CONFIG_MAIN
#define CATCH_CONFIG_ENABLE_BENCHMARKING
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "../../handlers/metrics/metrics_render.hpp"
#include "../../plugins/cpu/cpu_parse.hpp"
#include "../../plugins/cpufreq/cpufreq_sensor.hpp"
#include "../../plugins/devfreq/devfreq_sensor.hpp"
#include "../../plugins/diskio/diskio_parse.hpp"
#include "../../plugins/diskio/diskio_sensor.hpp"
#include "../../plugins/memory/memory_parse.hpp"
#include "../../plugins/network/network_parse.hpp"
#include "../../plugins/power/power_sensor.hpp"
#include "../../plugins/pressure/pressure_parse.hpp"
#include "../../plugins/pressure/pressure_sensor.hpp"
#include "../../plugins/thermal/thermal_sensor.hpp"
#include "../../tests/unit/plugins/sensor_test_util.hpp"
#include "store/sample_codec.hpp"

namespace {

std::string fixture(const char* relative) {
  const std::string path = std::string(KIWI_FIXTURES_DIR) + "/rk3588/" + relative;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// One tick of the default sensors on an 8-core board, as the store sees it: about 110 values,
// rates with many digits, zeros, whole KiB, temperatures with one decimal.
std::vector<std::pair<std::uint32_t, double>> tick(int t) {
  std::vector<std::pair<std::uint32_t, double>> v;
  std::uint32_t id = 1;
  for (int core = 0; core < 9; ++core)
    for (int mode = 0; mode < 8; ++mode)
      v.emplace_back(id++, mode < 3 ? ((core * 37 + mode * 11 + t * 7) % 1000) / 1337.0 : 0.0);
  for (int i = 0; i < 16; ++i) v.emplace_back(id++, 1024.0 * (8'000'000 + i * 1000 + t));
  for (int i = 0; i < 16; ++i) v.emplace_back(id++, i % 4 ? 0.0 : 1536.0 * (t % 7));
  for (int i = 0; i < 6; ++i) v.emplace_back(id++, 45.1 + i + (t % 3) / 10.0);
  return v;
}

kiwi::Snapshot snapshot() {
  kiwi::Snapshot s;
  s.sequence = 7;
  s.timestamp = 1764475800;
  const char* modes[] = {"user", "system", "idle", "iowait", "irq", "softirq", "steal", "nice"};
  for (const char* sensor : {"cpu", "memory", "network", "diskio", "thermal", "storage"}) {
    kiwi::SensorReport r;
    r.name = r.plugin = sensor;
    r.duration_seconds = 0.00025;
    for (int i = 0; i < 24; ++i)
      r.metrics.push_back({std::string(sensor) + "_value",
                           {{"core", std::to_string(i % 9)}, {"mode", modes[i % 8]}},
                           i / 7.0,
                           "ratio",
                           i % 3 ? kiwi::MetricKind::gauge : kiwi::MetricKind::counter});
    s.sensors.push_back(std::move(r));
  }
  return s;
}

}  // namespace

TEST_CASE("parsers: the procfs tables of one tick") {
  const std::string stat = fixture("proc/stat"), meminfo = fixture("proc/meminfo"),
                    netdev = fixture("proc/net/dev"), diskstats = fixture("proc/diskstats");
  CHECK(kiwi::cpu::parse_proc_stat(stat).cores.size() >= 8);
  CHECK(!kiwi::memory::parse_meminfo(meminfo).empty());
  CHECK(!kiwi::network::parse_net_dev(netdev).interfaces.empty());
  CHECK(!kiwi::diskio::parse_diskstats(diskstats).empty());
  BENCHMARK("cpu: /proc/stat") {
    return kiwi::cpu::parse_proc_stat(stat);
  };
  BENCHMARK("memory: /proc/meminfo") {
    return kiwi::memory::parse_meminfo(meminfo);
  };
  BENCHMARK("network: /proc/net/dev") {
    return kiwi::network::parse_net_dev(netdev);
  };
  BENCHMARK("diskio: /proc/diskstats") {
    return kiwi::diskio::parse_diskstats(diskstats);
  };
}

TEST_CASE("sample codec: a tick, and a commit's block of ten") {
  namespace codec = kiwi::agent::sample_codec;
  std::vector<codec::Tick> ticks;
  for (int t = 0; t < 10; ++t) {
    auto v = tick(t);
    std::string blob;
    codec::encode(blob, v);
    ticks.emplace_back(t * 1000, std::move(blob));
  }
  const std::string block = codec::pack_block(0, ticks.data(), ticks.data() + ticks.size());
  std::string buf;
  std::vector<std::pair<std::int64_t, std::string_view>> back;
  REQUIRE(codec::unpack_block(block, 0, buf, back));
  CHECK(back.size() == 10);
  BENCHMARK("encode one tick") {
    auto v = tick(3);
    std::string blob;
    codec::encode(blob, v);
    return blob;
  };
  BENCHMARK("decode one tick") {
    double sum = 0;
    codec::decode(ticks[3].second, [&](std::uint32_t, double v) { sum += v; });
    return sum;
  };
  BENCHMARK("pack a block of 10 ticks (deflate)") {
    return codec::pack_block(0, ticks.data(), ticks.data() + ticks.size());
  };
  BENCHMARK("unpack a block of 10 ticks (inflate)") {
    return codec::unpack_block(block, 0, buf, back);
  };
}

TEST_CASE("metrics: the Prometheus exposition of a snapshot of 144 series") {
  const kiwi::Snapshot s = snapshot();
  kiwi::AgentStats stats;
  stats.version = "bench";
  for (int i = 0; i < 7; ++i) stats.http_requests.push_back({"/route" + std::to_string(i), 200, 5});
  CHECK(kiwi_metrics::render(s, stats).size() > 5000);
  BENCHMARK("render") {
    return kiwi_metrics::render(s, stats);
  };
}

namespace {
struct NullLog final : kiwi::Logger {
  void log(kiwi::LogLevel, std::string_view) override {}
};
struct CountingSink final : kiwi::MetricSink {
  using kiwi::MetricSink::emit;
  void emit(const kiwi::MetricSpec&, std::span<const kiwi::Label>, double) override { ++n; }
  std::size_t n = 0;
};
}  // namespace

TEST_CASE("pressure: its files' parsers, and a whole sample (five files read) of the sensor") {
  const std::string psi = fixture("proc/pressure/io"), vmstat = fixture("proc/vmstat"),
                    stat = fixture("proc/stat");
  CHECK(kiwi::pressure::parse_psi(psi).some);
  CHECK(kiwi::pressure::parse_vmstat(vmstat).pgmajfault);
  BENCHMARK("pressure: /proc/pressure/io") {
    return kiwi::pressure::parse_psi(psi);
  };
  BENCHMARK("pressure: /proc/vmstat") {
    return kiwi::pressure::parse_vmstat(vmstat);
  };
  BENCHMARK("pressure: btime of /proc/stat") {
    return kiwi::pressure::parse_btime(stat);
  };
  NullLog log;
  const kiwi::Options options;
  const std::string procfs = std::string(KIWI_FIXTURES_DIR) + "/rk3588/proc";
  const std::string sysfs = std::string(KIWI_FIXTURES_DIR) + "/rk3588/sys";
  kiwi::pressure::PressureSensor sensor(
      kiwi::SensorContext{"pressure", procfs, sysfs, options, log, [] {}});
  CountingSink sink;
  sensor.sample(sink);
  CHECK(sink.n > 20);
  BENCHMARK("pressure: one sample of the sensor (pread of 5 kept files, parse, emit)") {
    return sensor.sample(sink);
  };
}

namespace {
// One whole sample of a sensor on a fixture board: its directory listings, its reads and parses,
// its values emitted (to a sink that only counts them). `min_values` checks it found its files.
template <class Sensor>
void bench_sample(const std::string& title, const char* board, std::size_t min_values,
                  const kiwi::Options& options = {}) {
  NullLog log;
  const std::string root = std::string(KIWI_FIXTURES_DIR) + "/" + board;
  Sensor sensor(kiwi::SensorContext{"bench", root + "/proc", root + "/sys", options, log, [] {}});
  CountingSink sink;
  sensor.sample(sink);
  CHECK(sink.n >= min_values);
  BENCHMARK(title.c_str()) {
    return sensor.sample(sink);
  };
}
}  // namespace

TEST_CASE("board health: one sample of each reader on the board that has its files") {
  bench_sample<kiwi::cpufreq::CpufreqSensor>(
      "cpufreq: one sample, RK3588 (3 policies listed, 24 files read)", "rk3588", 21);
  bench_sample<kiwi::devfreq::DevfreqSensor>(
      "devfreq: one sample, RK3588 (3 devices listed, 12 files read)", "rk3588", 12);
  bench_sample<kiwi::power::PowerSensor>("power: one sample, Raspberry Pi 4 (2 files read)", "rpi4",
                                         9);
  const kiwi::Options thermal(kiwi_sensor_test::default_values(kiwi::thermal::kOptions));
  bench_sample<kiwi::thermal::ThermalSensor>(
      "thermal: one sample, RK3588 (7 zones, 4 cooling devices, kept files)", "rk3588", 24,
      thermal);
  // The eMMC's wear costs what the same sample costs with `wear` off, side by side.
  const auto diskio = kiwi_sensor_test::default_values(kiwi::diskio::kOptions);
  bench_sample<kiwi::diskio::DiskioSensor>(
      "diskio: one sample, RK3588, wear off (diskstats read, 3 disks, 15 counters)", "rk3588", 15,
      kiwi::Options(kiwi_sensor_test::with_bool(diskio, "wear", false)));
  bench_sample<kiwi::diskio::DiskioSensor>(
      "diskio: the same with the eMMC's wear (+ life_time, pre_eol_info: 5 values)", "rk3588", 20,
      kiwi::Options(diskio));
}
