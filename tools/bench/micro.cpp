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
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../../handlers/metrics/metrics_render.hpp"
#include "../../plugins/clock/clock_sensor.hpp"
#include "../../plugins/cpu/cpu_parse.hpp"
#include "../../plugins/cpu/cpu_sensor.hpp"
#include "../../plugins/cpufreq/cpufreq_sensor.hpp"
#include "../../plugins/devfreq/devfreq_sensor.hpp"
#include "../../plugins/diskio/diskio_parse.hpp"
#include "../../plugins/diskio/diskio_sensor.hpp"
#include "../../plugins/hwmon/hwmon_sensor.hpp"
#include "../../plugins/memory/memory_parse.hpp"
#include "../../plugins/memory/memory_sensor.hpp"
#include "../../plugins/network/network_parse.hpp"
#include "../../plugins/network/network_sensor.hpp"
#include "../../plugins/power/power_sensor.hpp"
#include "../../plugins/pressure/pressure_parse.hpp"
#include "../../plugins/pressure/pressure_sensor.hpp"
#include "../../plugins/processes/processes_parse.hpp"
#include "../../plugins/processes/processes_sensor.hpp"
#include "../../plugins/storage/storage_sensor.hpp"
#include "../../plugins/thermal/thermal_sensor.hpp"
#include "../../tests/unit/plugins/sensor_test_util.hpp"
#include "alert/engine.hpp"
#include "config/config.hpp"
#include "store/sample_codec.hpp"
#include "store/store.hpp"

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

TEST_CASE("sample codec: a tick, and a commit's block of ten and of sixty") {
  namespace codec = kiwi::agent::sample_codec;
  std::vector<codec::Tick> ticks;
  const auto add_ticks = [&ticks](int from, int to) {
    for (int t = from; t < to; ++t) {
      auto v = tick(t);
      std::string blob;
      codec::encode(blob, v);
      ticks.emplace_back(t * 1000, std::move(blob));
    }
  };
  add_ticks(0, 10);
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
  // The default commit_interval from issue 39 on: a block of 60 ticks (format 3, by series),
  // what the writer pays a minute, and what a raw query pays to read it (unpack + decode).
  add_ticks(10, 60);
  const std::string block60 = codec::pack_block(0, ticks.data(), ticks.data() + ticks.size());
  BENCHMARK("pack a block of 60 ticks") {
    return codec::pack_block(0, ticks.data(), ticks.data() + ticks.size());
  };
  BENCHMARK("unpack a block of 60 ticks and decode every value") {
    double sum = 0;
    codec::unpack_block(block60, 0, buf, back);
    for (auto& tick : back) codec::decode(tick.second, [&](std::uint32_t, double v) { sum += v; });
    return sum;
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
  // No file: one adjtimex(2) of this machine's kernel, whatever the board.
  bench_sample<kiwi::clock::ClockSensor>("clock: one sample (one adjtimex(2) call, 3 values)", "vm",
                                         3);
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
  // The x86 fixture's it8613: 26 series among five temperature-only chips. The chips and their
  // channels are listed again every 10 s: a sensor's first sample is that listing and a sample.
  const kiwi::Options hwmon(kiwi_sensor_test::default_values(kiwi::hwmon::kOptions));
  bench_sample<kiwi::hwmon::HwmonSensor>(
      "hwmon: one sample, x86 mini PC (an it8613's 26 files read)", "x86", 26, hwmon);
  NullLog log;
  const std::string procfs = std::string(KIWI_FIXTURES_DIR) + "/x86/proc",
                    sysfs = std::string(KIWI_FIXTURES_DIR) + "/x86/sys";
  const kiwi::SensorContext ctx{"bench", procfs, sysfs, hwmon, log, [] {}};
  CountingSink sink;
  CHECK(kiwi::hwmon::HwmonSensor(ctx).sample(sink).status == kiwi::SampleStatus::ok);
  BENCHMARK("hwmon: a first sample, x86 mini PC (6 chips listed, then read)") {
    kiwi::hwmon::HwmonSensor fresh(ctx);
    return fresh.sample(sink);
  };
}

namespace {

// A procfs tree of 300 processes under `dir`/proc, as a board running a desktop or a few services
// has them: 120 kernel threads (kworkers with their workqueue, per-core threads; no memory of
// their own) and 180 programs, each a stat file in the kernel's layout (52 fields), pids from
// `first_pid` (and pid 1). /proc/stat is written before each sample (write_ticks).
void write_process_tree(const std::filesystem::path& dir, int first_pid, std::uint64_t ticks) {
  namespace fs = std::filesystem;
  fs::create_directories(dir / "proc");
  const char* programs[] = {
      "systemd",    "systemd-journal", "NetworkManager", "python3", "tmux: server", "(sd-pam)",
      "kiwi-agent", "chromium",        "Web Content",    "node",    "sshd",         "bash"};
  for (int i = 0; i < 300; ++i) {
    const int pid = i == 0 ? 1 : first_pid + i;
    const bool kernel = i > 0 && i <= 120;
    std::string comm = kernel ? (i % 3 ? "kworker/" + std::to_string(i % 8) + ":" +
                                             std::to_string(i) + "-events_unbound"
                                       : "ksoftirqd/" + std::to_string(i % 8))
                              : programs[i % std::size(programs)];
    const std::uint64_t utime = kernel ? 0 : ticks * (i % 17), stime = ticks * (i % 5);
    const char state = i % 10 ? 'S' : i % 20 ? 'R' : 'I';
    std::ostringstream line;
    line << pid << " (" << comm << ") " << state << " 1 " << pid << ' ' << pid << " 0 -1 "
         << (kernel ? 69238880 : 4194304) << " 2831 0 38 0 " << utime << ' ' << stime
         << " 0 0 20 0 " << 1 + i % 4 << " 0 " << 1000 + i << ' ' << (kernel ? 0 : 172032000) << ' '
         << (kernel ? 0 : 300 + 97 * i)
         << " 18446744073709551615 187650366284800 187650366508332 281474047065632 0 0 0 0 4096 "
            "81923 1 0 0 17 3 0 0 32 0 0 187650366568332 187650366588332 187650369568332 "
            "281474047066532 281474047066572 281474047066572 281474047069632 0\n";
    fs::create_directories(dir / "proc" / std::to_string(pid));
    std::ofstream(dir / "proc" / std::to_string(pid) / "stat") << line.str();
  }
}

// The number of processes in this machine's /proc.
int live_processes() {
  int n = 0;
  DIR* d = ::opendir("/proc");
  while (const dirent* e = d ? ::readdir(d) : nullptr)
    n += e->d_name[0] >= '1' && e->d_name[0] <= '9';
  if (d) ::closedir(d);
  return n;
}

// The CPU time (this thread's: user and system, the kernel's side of each read included) of one
// sample, the mean of `count`, in microseconds. Unlike a benchmark's wall time it does not count
// other programs' turns on a busy machine; it is what the "% of a core" is about.
template <class Before>
double cpu_us_per_sample(kiwi::Sensor& sensor, kiwi::MetricSink& sink, int count, Before before) {
  timespec a{}, b{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
  for (int i = 0; i < count; ++i) {
    before();
    sensor.sample(sink);
  }
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
  return (static_cast<double>(b.tv_sec - a.tv_sec) * 1e9 +
          static_cast<double>(b.tv_nsec - a.tv_nsec)) /
         count / 1e3;
}

void print_cost(const std::string& what, double us) {
  std::printf("\n%s: %.0f us of CPU a sample: %.4f %% of a core at 10 s, %.4f %% at 1 s\n",
              what.c_str(), us, us / 1e5, us / 1e4);
}

}  // namespace

TEST_CASE(
    "processes: a stat line, and one sample at 300 processes (a tree, this machine's /proc)") {
  namespace fs = std::filesystem;
  std::ifstream in(std::string(KIWI_FIXTURES_DIR) + "/x86/proc/1210/stat");
  std::ostringstream text;
  text << in.rdbuf();
  const std::string line = text.str();  // tmux: server
  CHECK(kiwi::processes::parse_pid_stat(line).pid == 1210);
  BENCHMARK("processes: parse one /proc/[pid]/stat") {
    return kiwi::processes::parse_pid_stat(line);
  };

  // Two trees of 300 processes with other pids, the sensor's root a link flipped between them
  // before each sample: every process is new to it, so each sample ranks all of them afresh, by
  // CPU (those that used any) and by memory: its most work. The flip (a write of the tree's
  // /proc/stat, symlink and rename) is in the figure.
  char scratch[] = "/tmp/kiwi-bench-processes-XXXXXX";
  REQUIRE(::mkdtemp(scratch));
  const fs::path dir = scratch;
  write_process_tree(dir / "a", 1000, 1);
  write_process_tree(dir / "b", 5000, 2);
  NullLog log;
  const kiwi::Options options(kiwi_sensor_test::default_values(kiwi::processes::kOptions));
  const std::string procfs = (dir / "root/proc").string(), sysfs = (dir / "sys").string();
  kiwi::processes::ProcessesSensor tree(
      kiwi::SensorContext{"processes", procfs, sysfs, options, log, [] {}});
  bool on_a = false;
  std::uint64_t idle = 0;
  auto flip = [&] {  // the other tree, with 400 ticks more of all cores in its /proc/stat
    on_a = !on_a;
    idle += 400;
    std::ofstream(dir / (on_a ? "a" : "b") / "proc/stat")
        << "cpu  0 0 0 " << idle << " 0 0 0 0 0 0\n";
    fs::create_directory_symlink(dir / (on_a ? "a" : "b"), dir / "root.new");
    fs::rename(dir / "root.new", dir / "root");
  };
  flip();
  CountingSink sink;
  tree.sample(sink);
  flip();
  sink.n = 0;
  tree.sample(sink);
  CHECK(sink.n == 9 + 2 + 2 * 5 * 3);  // states, pids, threads; 5 by cpu and 5 by memory
  BENCHMARK("processes: one sample of a tree of 300 processes (list, 300 stat files, rank, emit)") {
    flip();
    return tree.sample(sink);
  };
  print_cost("processes: a tree of 300 processes", cpu_us_per_sample(tree, sink, 200, flip));
  fs::remove_all(dir);

  // This machine's /proc with children of this program added to make 300 processes (each
  // asleep in pause()): the kernel's rendering of each stat is in this figure.
  struct Children {
    std::vector<pid_t> pids;
    ~Children() {
      for (const pid_t child : pids) ::kill(child, SIGKILL);
      for (const pid_t child : pids) ::waitpid(child, nullptr, 0);
    }
  } children;
  while (live_processes() < 300 && children.pids.size() < 300) {
    const pid_t child = ::fork();
    if (child == 0) {
      ::pause();
      ::_exit(0);
    }
    if (child > 0) children.pids.push_back(child);
  }
  kiwi::processes::ProcessesSensor live(
      kiwi::SensorContext{"processes", "/proc", "/sys", options, log, [] {}});
  sink.n = 0;
  live.sample(sink);
  CHECK(sink.n >= 9 + 2 + 5 * 2);  // by memory only: the first sample
  const int processes = live_processes();
  BENCHMARK("processes: one sample of this machine's /proc at " + std::to_string(processes) +
            " processes") {
    return live.sample(sink);
  };
  print_cost("processes: this machine's /proc at " + std::to_string(processes) + " processes",
             cpu_us_per_sample(live, sink, 200, [] {}));
}

namespace {

// One sample of `sensor` on a fixture board as the collector puts it in a snapshot: a report of
// its values (names, labels as the sensor gives them, values).
template <class Sensor>
kiwi::SensorReport report_of(const char* name, const char* board, const kiwi::Options& options) {
  NullLog log;
  const std::string root = std::string(KIWI_FIXTURES_DIR) + "/" + board;
  Sensor sensor(kiwi::SensorContext{name, root + "/proc", root + "/sys", options, log, [] {}});
  kiwi_sensor_test::RecordingSink sink;
  sensor.sample(sink);
  sink.samples.clear();  // the second sample: rates have a previous reading
  sensor.sample(sink);
  kiwi::SensorReport r;
  r.name = r.plugin = name;
  for (auto& s : sink.samples)
    r.metrics.push_back({s.name, {s.labels.begin(), s.labels.end()}, s.value, s.unit, s.kind});
  return r;
}

template <class Sensor>
kiwi::SensorReport report_of(const char* name, const char* board,
                             std::span<const kiwi::OptionSpec> table) {
  return report_of<Sensor>(name, board, kiwi::Options(kiwi_sensor_test::default_values(table)));
}

// A tick of the default sensors (config/kiwi-agent.toml) on the RK3588 fixture board, the power
// sensor on the Raspberry Pi 4's (the RK3588 has no firmware flags: the power rules would match
// nothing), and the agent's own report (its counters, and three series per sensor).
kiwi::Snapshot board_snapshot() {
  kiwi::Snapshot s;
  s.sequence = 1;
  s.timestamp = 1'796'119'200;
  s.stale_after_seconds = 3;
  const char* b = "rk3588";
  s.sensors.push_back(report_of<kiwi::cpu::CpuSensor>("cpu", b, kiwi::cpu::kOptions));
  s.sensors.push_back(
      report_of<kiwi::thermal::ThermalSensor>("thermal", b, kiwi::thermal::kOptions));
  s.sensors.push_back(report_of<kiwi::memory::MemorySensor>("memory", b, kiwi::Options{}));
  s.sensors.push_back(
      report_of<kiwi::storage::StorageSensor>("storage", b, kiwi::storage::kOptions));
  s.sensors.push_back(
      report_of<kiwi::network::NetworkSensor>("network", b, kiwi::network::kOptions));
  s.sensors.push_back(report_of<kiwi::diskio::DiskioSensor>("diskio", b, kiwi::diskio::kOptions));
  s.sensors.push_back(report_of<kiwi::pressure::PressureSensor>("pressure", b, kiwi::Options{}));
  s.sensors.push_back(report_of<kiwi::devfreq::DevfreqSensor>("devfreq", b, kiwi::Options{}));
  s.sensors.push_back(report_of<kiwi::power::PowerSensor>("power", "rpi4", kiwi::Options{}));
  s.sensors.push_back(report_of<kiwi::cpufreq::CpufreqSensor>("cpufreq", b, kiwi::Options{}));
  s.sensors.push_back(report_of<kiwi::hwmon::HwmonSensor>("hwmon", b, kiwi::hwmon::kOptions));
  s.sensors.push_back(
      report_of<kiwi::processes::ProcessesSensor>("processes", b, kiwi::processes::kOptions));
  kiwi::SensorReport agent;
  agent.name = agent.plugin = "agent";
  for (const char* counter : {"collector_ticks_total", "collector_missed_ticks_total",
                              "store_write_errors_total", "http_auth_failures_total"})
    agent.metrics.push_back({counter, {}, 0.0, "", kiwi::MetricKind::counter});
  for (const auto& r : s.sensors)
    for (const char* per_sensor :
         {"sensor_errors_total", "sensor_sample_duration_seconds", "sensor_success"})
      agent.metrics.push_back({per_sensor, {{"sensor", r.name}}, 0.0, "", kiwi::MetricKind::gauge});
  s.sensors.push_back(std::move(agent));
  for (auto& r : s.sensors) r.timestamp = s.timestamp;
  return s;
}

// The next tick: one second later, the agent's tick counter one more.
void next_tick(kiwi::Snapshot& s) {
  ++s.sequence;
  s.timestamp += 1;
  for (auto& r : s.sensors) r.timestamp = s.timestamp;
  s.sensors.back().metrics.front().value += 1;
}

}  // namespace

TEST_CASE(
    "alerts: the rule engine on a tick of the default sensors, with 0, the built-in and 50 rules") {
  namespace fs = std::filesystem;
  const kiwi::Snapshot board = board_snapshot();
  std::size_t series = 0;
  for (auto& r : board.sensors) series += r.metrics.size();
  CHECK(series > 200);
  // The built-in rules (nine); and those with the 41 of tools/bench/alert-rules.toml, as
  // tools/bench/alerts.py runs the agent ("Alerts: 50 rules" in docs/benchmarks.md).
  const kiwi::agent::Config builtin = kiwi::agent::load_config_text("", "<bench>", "/");
  const kiwi::agent::Config fifty = kiwi::agent::load_config_text(
      kiwi_sensor_test::read_text(std::string(KIWI_SOURCE_DIR) + "/tools/bench/alert-rules.toml"),
      "tools/bench/alert-rules.toml", "/");
  const int built_in = static_cast<int>(builtin.alert_rules.size());
  REQUIRE(fifty.alert_rules.size() == 50);
  char scratch[] = "/tmp/kiwi-bench-alerts-XXXXXX";
  REQUIRE(::mkdtemp(scratch));
  NullLog log;
  std::printf("\nalerts: a tick of %zu series in %zu reports\n", series, board.sensors.size());
  for (const auto& [count, rules] :
       {std::pair{0, &builtin.alert_rules}, std::pair{built_in, &builtin.alert_rules},
        std::pair{50, &fifty.alert_rules}}) {
    kiwi::agent::Store store(
        (fs::path(scratch) / ("rules-" + std::to_string(count) + ".db")).string());
    kiwi::agent::AlertEngine engine(store, log);
    std::vector<std::string> disabled;
    if (count == 0)
      for (auto& r : *rules) disabled.push_back(r.name);
    engine.configure(*rules, disabled);
    kiwi::Snapshot s = board;
    CountingSink sink;
    for (int i = 0; i < 3; ++i) {  // rates have their first readings; the firing rules fire
      next_tick(s);
      engine.sample(s, sink);
    }
    const std::size_t firing = engine.alerts().size();
    if (count == 50) CHECK(firing > 0);  // the rules that fire on any board do
    BENCHMARK("alerts: one tick, " + std::to_string(count) + " rules (" + std::to_string(firing) +
              " instances not inactive)") {
      next_tick(s);
      return engine.sample(s, sink);
    };
    // CPU time (this thread's), not wall time: what "% of a core" is about.
    timespec a{}, b{};
    constexpr int kTicks = 2000;
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    for (int i = 0; i < kTicks; ++i) {
      next_tick(s);
      engine.sample(s, sink);
    }
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    const double us = (static_cast<double>(b.tv_sec - a.tv_sec) * 1e9 +
                       static_cast<double>(b.tv_nsec - a.tv_nsec)) /
                      kTicks / 1e3;
    std::printf("alerts: %d rules: %.1f us of CPU a tick: %.4f %% of a core at 1 s\n", count, us,
                us / 1e4);
    store.flush(0, 0);
  }
  fs::remove_all(scratch);
}
