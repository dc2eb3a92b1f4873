// Golden end-to-end test, as node_exporter's: the real kiwi-agent with procfs and sysfs pointed at
// a copy of each fixture board, two scripted samples (the board's files, then its next/ overlay one
// second later, so every rate and ratio is exact), then /metrics and /api/current compared with
// tests/golden/<board>.metrics and <board>.current.json after normalising what varies from run to
// run (times, durations, the host, live statvfs numbers, the host's clock). See
// tests/golden/README.md.
//
// KIWI_UPDATE_GOLDEN=1 rewrites the golden files instead of comparing; review the diff.
#include <rapidjson/document.h>
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>

#include "checks.hpp"
#include "harness.hpp"

using namespace kiwi_test;
using namespace std::chrono_literals;

namespace {

const fs::path kFixtures = KIWI_FIXTURES_DIR;
const fs::path kGolden = fs::path(KIWI_SOURCE_DIR) / "tests/golden";

// The sensor plugins whose metrics are compared exactly; everything else in /metrics is the
// agent's own (build, start time, ticks, HTTP counters) and only its names and labels are kept.
constexpr std::string_view kSensorPrefixes[] = {
    "kiwi_cpu_",    "kiwi_thermal_",  "kiwi_memory_",    "kiwi_storage_",   "kiwi_network_",
    "kiwi_diskio_", "kiwi_pressure_", "kiwi_vm_",        "kiwi_boot_time_", "kiwi_devfreq_",
    "kiwi_power_",  "kiwi_cpufreq_",  "kiwi_processes_", "kiwi_hwmon_",     "kiwi_clock_"};
// Self-metrics whose values are deterministic on a fixture: per sensor, and the bytes written,
// which the agent reads from the board's proc/self/io (vm has one).
constexpr std::string_view kExactSelfMetrics[] = {
    "kiwi_sensor_success", "kiwi_sensor_errors_total", "kiwi_sensor_invalid_metrics_total",
    "kiwi_snapshot_file_write_errors_total", "kiwi_agent_disk_written_bytes_total"};

// What the golden files keep of a metric of the agent's own report, by its /metrics family
// (kiwi_<name>), in /metrics and in /api/current alike: the HTTP counters are left out (they
// depend on how often the test polled), build_info's labels name the build, the per-sensor values
// that a fixture fixes are kept, and the rest (times, ticks) become a placeholder.
enum class SelfMetric { left_out, build_info, exact, varies };
SelfMetric self_metric(std::string_view family) {
  if (family == "kiwi_http_requests_total") return SelfMetric::left_out;
  if (family == "kiwi_build_info") return SelfMetric::build_info;
  if (std::find(std::begin(kExactSelfMetrics), std::end(kExactSelfMetrics), family) !=
      std::end(kExactSelfMetrics))
    return SelfMetric::exact;
  return SelfMetric::varies;
}

bool update_requested() {
  const char* v = std::getenv("KIWI_UPDATE_GOLDEN");
  return v && std::string_view(v) == "1";
}

std::string replace_all(std::string text, std::string_view from, std::string_view to) {
  for (std::size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// Mountinfo's mount point column with the kernel's octal escapes (\040) decoded.
std::vector<std::string> mount_points(const std::string& mountinfo) {
  std::vector<std::string> out;
  std::istringstream lines(mountinfo);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string field;
    for (int i = 0; i < 5 && fields >> field; ++i) {
    }
    std::string decoded;
    for (std::size_t i = 0; i < field.size(); ++i) {
      if (field[i] == '\\' && i + 3 < field.size()) {
        decoded.push_back(static_cast<char>(std::stoi(field.substr(i + 1, 3), nullptr, 8)));
        i += 3;
      } else {
        decoded.push_back(field[i]);
      }
    }
    out.push_back(decoded);
  }
  return out;
}

// Copies every file of `from` over `to`, each through a temporary name and rename(), so a sample
// never reads half a file.
void overlay(const fs::path& from, const fs::path& to) {
  for (const auto& entry : fs::recursive_directory_iterator(from)) {
    if (!entry.is_regular_file()) continue;
    const fs::path target = to / fs::relative(entry.path(), from);
    fs::create_directories(target.parent_path());
    fs::copy_file(entry.path(), target.string() + ".new", fs::copy_options::overwrite_existing);
    fs::rename(target.string() + ".new", target);
  }
}

// One /api/current body as the test reads it: its sequence, its stamp (unix seconds), and whether
// every sensor's reading in it is that tick's (a sensor that came back after the tick published is
// shown with its previous reading and stamp).
struct Sample {
  std::uint64_t sequence = 0;
  double timestamp = 0;
  bool all_fresh = false;
};

Sample sample_of(const std::string& current_json) {
  rapidjson::Document d;
  d.Parse(current_json.c_str(), current_json.size());
  Sample s;
  if (d.HasParseError() || !d.IsObject() || !d.HasMember("sequence")) return s;
  s.sequence = d["sequence"].GetUint64();
  s.timestamp = d["timestamp"].GetDouble();
  s.all_fresh = d["sensors"].MemberCount() > 0;
  for (const auto& sensor : d["sensors"].GetObject())
    s.all_fresh = s.all_fresh && sensor.value["timestamp"].GetDouble() == s.timestamp;
  return s;
}

// kiwi-agent on a fixture board: [agent] procfs/sysfs point at a scratch copy of the board, and
// storage's statvfs at a scratch directory holding the board's mount points (so which mounts are
// reported does not depend on the machine running the test).
class BoardAgent {
 public:
  explicit BoardAgent(std::string board) : board_(std::move(board)) {
    fs::copy(kFixtures / board_, tree(), fs::copy_options::recursive);
    for (const auto& mount : mount_points(read_text(tree() / "proc/self/mountinfo")))
      fs::create_directories(rootfs() / fs::path(mount).relative_path());
    // The default sensors, in the default order, so the golden files show what users get.
    const std::string toml = R"([agent]
data_dir = "@SCRATCH@/data"
plugin_dir = "@PLUGINS@"
procfs = "@SCRATCH@/board/proc"
sysfs = "@SCRATCH@/board/sys"
[http]
bind = "127.0.0.1:0"
[collector]
interval = "1s"
snapshot_path = ""
[[sensor]]
plugin = "cpu"
[[sensor]]
plugin = "thermal"
[[sensor]]
plugin = "memory"
[[sensor]]
plugin = "storage"
[sensor.options]
rootfs = "@SCRATCH@/rootfs"
[[sensor]]
plugin = "network"
[[sensor]]
plugin = "diskio"
[[sensor]]
plugin = "pressure"
[[sensor]]
plugin = "devfreq"
[[sensor]]
plugin = "power"
[[sensor]]
plugin = "cpufreq"
[[sensor]]
plugin = "processes"
[[sensor]]
plugin = "hwmon"
[[sensor]]
plugin = "clock"
)";
    AgentOptions options;
    options.config_file = dir_.path / "kiwi.toml";
    write_text(options.config_file, replace_all(replace_all(toml, "@SCRATCH@", dir_.path.string()),
                                                "@PLUGINS@", KIWI_PLUGIN_DIR));
    options.ready = Ready::listening;  // the test reads the samples it waits for itself
    agent_.emplace(std::move(options));
  }

  fs::path tree() const { return dir_.path / "board"; }
  fs::path rootfs() const { return dir_.path / "rootfs"; }
  const fs::path& scratch() const { return dir_.path; }
  int port() const { return agent_->port(); }
  void advance() const { overlay(kFixtures / board_ / "next", tree()); }

 private:
  std::string board_;
  TempDir dir_;                 // the board, its mount points and the data dir
  std::optional<Agent> agent_;  // after dir_: stopped before the board is removed
};

// Strings and numbers that differ from run to run, replaced by a placeholder naming what they are.
std::string normalise_current(const std::string& body, const fs::path& scratch) {
  rapidjson::Document d;
  d.Parse(body.c_str(), body.size());
  REQUIRE_FALSE(d.HasParseError());
  auto& a = d.GetAllocator();
  auto placeholder = [&](rapidjson::Value& v, const char* what) { v.SetString(what, a); };
  placeholder(d["host"], "<host>");
  placeholder(d["sequence"], "<sequence>");
  placeholder(d["timestamp"], "<timestamp>");
  placeholder(d["agent"]["version"], "<version>");
  placeholder(d["agent"]["uptime_seconds"], "<uptime>");
  for (auto& sensor : d["sensors"].GetObject()) {
    auto& s = sensor.value;
    placeholder(s["timestamp"], "<timestamp>");
    placeholder(s["duration_seconds"], "<duration>");
    if (s.HasMember("message")) {
      const std::string message =
          replace_all(s["message"].GetString(), scratch.string(), "<scratch>");
      s["message"].SetString(message.c_str(), static_cast<rapidjson::SizeType>(message.size()), a);
    }
    if (std::string_view(sensor.name.GetString()) == "agent") {  // kiwi::kAgentReport
      // The agent's own report: normalised as /metrics shows it.
      auto& metrics = s["metrics"];
      for (auto m = metrics.Begin(); m != metrics.End();) {
        const SelfMetric kind = self_metric("kiwi_" + std::string((*m)["name"].GetString()));
        if (kind == SelfMetric::left_out) {
          m = metrics.Erase(m);
          continue;
        }
        if (kind == SelfMetric::build_info) (*m)["labels"].SetString("<version and abi>", a);
        if (kind != SelfMetric::exact) placeholder((*m)["value"], "<agent>");
        ++m;
      }
      continue;
    }
    for (auto& m : s["metrics"].GetArray()) {
      const std::string name = m["name"].GetString();
      // statvfs numbers are the scratch directory's filesystem, live; read-only comes from
      // mountinfo.
      if (name.starts_with("storage_") && name != "storage_readonly")
        placeholder(m["value"], "<statvfs>");
      // The clock sensor asks the kernel of the machine running the test (adjtimex), not the board.
      if (name.starts_with("clock_")) placeholder(m["value"], "<adjtimex>");
    }
  }
  rapidjson::StringBuffer out;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> w(out);
  w.SetIndent(' ', 2);
  d.Accept(w);
  return std::string(out.GetString(), out.GetSize()) + "\n";
}

std::string normalise_metrics(const std::string& body, const fs::path& scratch) {
  std::string out;
  std::istringstream lines(replace_all(body, scratch.string(), "<scratch>"));
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("#")) {
      out += line + "\n";
      continue;
    }
    const std::string series = line.substr(0, line.rfind(' '));
    const std::string family = series.substr(0, series.find('{'));
    auto starts = [&](std::string_view prefix) { return family.starts_with(prefix); };
    if (std::any_of(std::begin(kSensorPrefixes), std::end(kSensorPrefixes), starts)) {
      // statvfs numbers are the scratch directory's filesystem, live; the clock is this machine's.
      const bool statvfs = starts("kiwi_storage_") && family != "kiwi_storage_readonly";
      out += statvfs                 ? series + " <statvfs>\n"
             : starts("kiwi_clock_") ? series + " <adjtimex>\n"
                                     : line + "\n";
      continue;
    }
    switch (self_metric(family)) {
      case SelfMetric::left_out:
        break;
      case SelfMetric::build_info:
        out += "kiwi_build_info{<version and abi>} 1\n";
        break;
      case SelfMetric::exact:
        out += line + "\n";
        break;
      case SelfMetric::varies:
        out += series + " <agent>\n";
        break;
    }
  }
  return out;
}

// Compares with (or, with KIWI_UPDATE_GOLDEN=1, rewrites) tests/golden/<name>. On a difference the
// first differing line is shown and the actual output is left next to the build for a diff.
void check_golden(const std::string& name, const std::string& actual) {
  const fs::path golden = kGolden / name;
  if (update_requested()) {
    fs::create_directories(kGolden);
    write_text(golden, actual);
    WARN("rewrote " << golden.string());
    return;
  }
  INFO("golden file " << golden.string() << " (KIWI_UPDATE_GOLDEN=1 rewrites it)");
  REQUIRE(fs::exists(golden));
  const std::string expected = read_text(golden);
  if (expected == actual) return;
  const fs::path saved = fs::temp_directory_path() / ("kiwi-golden-actual-" + name);
  write_text(saved, actual);
  std::istringstream e(expected), a(actual);
  std::string el, al;
  int line = 1;
  while (std::getline(e, el) && std::getline(a, al) && el == al) ++line;
  INFO("first difference at line " << line << ":\n  expected: " << el << "\n  actual:   " << al
                                   << "\nactual output saved as " << saved.string() << "; diff -u "
                                   << golden.string() << " " << saved.string());
  CHECK(expected == actual);
}

// The network and diskio rates of the sample are in /api/history too, under the series keys the
// dashboard asks for (history stores non-integral values as 32-bit floats, hence the tolerance).
void check_history(HttpClient& c, const std::string& current_body) {
  rapidjson::Document now;
  now.Parse(current_body.c_str(), current_body.size());
  const double timestamp = now["timestamp"].GetDouble();
  rapidjson::Document history;
  REQUIRE(eventually(
      [&] {  // the store may write the sample a moment after publishing it
        const std::string body = c.get("/api/history?limit=1&series=network_*,diskio_*&until=" +
                                       std::to_string(static_cast<std::int64_t>(timestamp)))
                                     .body;
        history.Parse(body.c_str(), body.size());
        return !history.HasParseError() && history.HasMember("timestamps") &&
               history["timestamps"].Size() == 1 &&
               history["timestamps"][0].GetDouble() == timestamp;
      },
      5s));
  for (const char* sensor : {"network", "diskio"})
    for (const auto& m : now["sensors"][sensor]["metrics"].GetArray()) {
      // name{a="x",b="y"}: the store's key, its labels in the order the sensor gave them.
      std::string key = m["name"].GetString();
      if (m.HasMember("labels")) {
        char separator = '{';
        for (const auto& l : m["labels"].GetObject()) {
          key += separator + std::string(l.name.GetString()) + "=\"" + l.value.GetString() + "\"";
          separator = ',';
        }
        key += '}';
      }
      INFO(key);
      REQUIRE(history["series"].HasMember(key.c_str()));
      const auto& values = history["series"][key.c_str()]["values"];
      REQUIRE(values.Size() == 1);
      REQUIRE(values[0].IsNumber());
      const double expected = m["value"].GetDouble();
      CHECK(std::fabs(values[0].GetDouble() - expected) <=
            1e-4 * std::max(1.0, std::fabs(expected)));
    }
}

// One golden run of `board`. Returns false if the two samples it took are not the pair it means
// (the board's files, then all of its next/ files, read by consecutive calls of every sensor), so
// the caller may try again on a new agent; whether they are is decided from what the agent says
// of them, never from how long anything took.
bool run_board(const std::string& board) {
  BoardAgent agent(board);
  HttpClient c(agent.port());
  // The first sample: a scheduled tick (sequence 2 or later; 1 is the start-up sample, stamped with
  // the nearest boundary, maybe ahead of the wall clock) in which every sensor's reading is that
  // tick's, so every sensor has finished reading the board's first files before the test replaces
  // them. Taken early in its second, the files are most likely replaced before the next tick.
  Sample first;
  REQUIRE(eventually(
      [&] {
        first = sample_of(c.get("/api/current").body);
        return first.sequence >= 2 && first.all_fresh && now_seconds() < first.timestamp + 0.5;
      },
      10s));
  agent.advance();
  const double advanced_at = now_seconds();
  std::string current;
  REQUIRE(eventually(
      [&] {
        current = c.get("/api/current").body;
        return sample_of(current).sequence > first.sequence;
      },
      5s));
  const auto metrics = c.get("/metrics");
  REQUIRE(metrics.status == 200);
  // The second sample is the pair's if it is the next tick, every sensor's reading in it is that
  // tick's, and the tick is stamped after the files were replaced: a tick's calls start when the
  // wall clock reaches its stamp or later (collect/schedule.hpp), so none of them read the board
  // before all of next/ was in place, and each sensor's previous call was its first-sample one.
  // /metrics must show the same sample: the same sequence is still current after fetching it.
  const Sample second = sample_of(current);
  if (second.sequence != first.sequence + 1 || !second.all_fresh ||
      second.timestamp <= advanced_at ||
      sample_of(c.get("/api/current").body).sequence != second.sequence)
    return false;

  check_golden(board + ".current.json", normalise_current(current, agent.scratch()));
  check_history(c, current);
  check_golden(board + ".metrics", normalise_metrics(metrics.body, agent.scratch()));
  // The raw exposition, with every awkward label value, is valid for Prometheus.
  if (std::system("command -v promtool > /dev/null 2>&1") == 0) {
    const fs::path file = agent.scratch() / "metrics.txt";
    write_text(file, metrics.body);
    const fs::path out = agent.scratch() / "promtool.txt";
    const int code = std::system(
        ("promtool check metrics < " + file.string() + " > " + out.string() + " 2>&1").c_str());
    INFO(read_text(out));
    CHECK(code == 0);
  }
  return true;
}

void golden(const std::string& board) {
  for (int attempt = 1; attempt <= 3; ++attempt)
    if (run_board(board)) return;
  FAIL("could not take the pair of samples of "
       << board << " (the board's files, then next/) in 3 attempts");
}

}  // namespace

TEST_CASE("golden: RK3588 board: 8 cores with frequencies, 7 thermal zones, eMMC/NVMe/USB, eth0") {
  golden("rk3588");
}

TEST_CASE("golden: Raspberry Pi 4: one thermal zone, SD card, swap file, eth0 and Wi-Fi") {
  golden("rpi4");
}

TEST_CASE("golden: Raspberry Pi 5: NVMe boot, the Active Cooler's fan, RP1's ADC, eth0 and Wi-Fi") {
  golden("rpi5");
}

TEST_CASE("golden: VM: no temperatures and no error, virtio disk and NIC, Docker bridge") {
  golden("vm");
}

TEST_CASE("golden: x86 mini PC: hwmon only, two NVMe drives, 2.5GbE") {
  golden("x86");
}

TEST_CASE("golden: awkward board: offline cores, counters going back, old kernel, odd mounts") {
  golden("awkward");
}
