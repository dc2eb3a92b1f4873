// cpu plugin: /proc/stat, loadavg and cpufreq parsing, and the sensor on fixture boards.
// Expected ratios are worked out by hand from the deltas between tests/fixtures/<board>/proc/stat
// and next/proc/stat, the same file one second later (see the board READMEs).
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "cpu_parse.hpp"
#include "cpu_sensor.hpp"
#include "sensor_test_util.hpp"

using Catch::Matchers::Contains;
using kiwi_sensor_test::fixture;
using kiwi_sensor_test::Harness;
using kiwi_sensor_test::read_text;
using kiwi_sensor_test::ScratchTree;

namespace {

kiwi::cpu::CpuTimes times(std::initializer_list<std::uint64_t> ticks) {
  kiwi::cpu::CpuTimes t;
  std::copy(ticks.begin(), ticks.end(), t.ticks.begin());
  return t;
}

std::vector<kiwi::OptionValue> defaults() {
  return kiwi_sensor_test::default_values(kiwi::cpu::kOptions);
}

}  // namespace

TEST_CASE("cpu: /proc/stat of an RK3588 gives the total and 8 cores keyed by number") {
  const auto stat = kiwi::cpu::parse_proc_stat(read_text(fixture("rk3588/proc/stat")));
  REQUIRE(stat.all);
  REQUIRE(stat.cores.size() == 8);
  CHECK(stat.cores.begin()->first == 0);
  CHECK(stat.cores.rbegin()->first == 7);
  // cpu0 98213 412 40127 2005342 3891 0 6210 0 0 0
  CHECK(stat.cores.at(0).ticks == times({98213, 412, 40127, 2005342, 3891, 0, 6210, 0}).ticks);
  CHECK(stat.all->ticks == times({746413, 4307, 240320, 16228333, 14362, 0, 19695, 0}).ticks);
}

TEST_CASE("cpu: guest time is not added to the total a second time") {
  // guest (9th column) 300 is already inside user 1000.
  const auto stat = kiwi::cpu::parse_proc_stat("cpu  1000 0 500 8000 100 0 50 350 300 0\n");
  REQUIRE(stat.all);
  CHECK(stat.all->total() == 10000);
}

TEST_CASE("cpu: an old kernel's 4-column /proc/stat still parses, missing modes as 0") {
  const auto stat = kiwi::cpu::parse_proc_stat("cpu  100 0 50 850\ncpu0 100 0 50 850\n");
  REQUIRE(stat.all);
  CHECK(stat.all->ticks == times({100, 0, 50, 850, 0, 0, 0, 0}).ticks);
  CHECK(stat.cores.size() == 1);
}

TEST_CASE("cpu: a damaged cpu line is reported with the line, not silently read as 0") {
  CHECK_THROWS_WITH(kiwi::cpu::parse_proc_stat("cpu  1 2 x 4\n"), Contains("cpu  1 2 x 4"));
  CHECK_THROWS_WITH(kiwi::cpu::parse_proc_stat("cpu3 1 2\n"), Contains("at least 4"));
}

TEST_CASE("cpu: ratios between two RK3588 readings match the hand-computed deltas") {
  const auto before = kiwi::cpu::parse_proc_stat(read_text(fixture("rk3588/proc/stat")));
  const auto after = kiwi::cpu::parse_proc_stat(read_text(fixture("rk3588/next/proc/stat")));
  const auto r = kiwi::cpu::compute_ratios(*before.all, *after.all);
  REQUIRE(r);
  // Deltas over all cores: user 200 nice 5 system 53 idle 534 iowait 5 irq 1 softirq 2, total 800.
  CHECK(r->usage == Approx(261.0 / 800));
  const double expected[] = {200, 5, 53, 534, 5, 1, 2, 0};
  for (std::size_t i = 0; i < 8; ++i) {
    INFO(kiwi::cpu::kModeNames[i]);
    CHECK(r->modes[i] == Approx(expected[i] / 800));
  }
  const auto core4 = kiwi::cpu::compute_ratios(before.cores.at(4), after.cores.at(4));
  REQUIRE(core4);
  CHECK(core4->usage == Approx(0.96));  // idle 4 of 100 ticks
}

TEST_CASE("cpu: counters that go backwards or do not move give no ratio") {
  const auto a = times({100, 0, 50, 850, 0, 0, 0, 0});
  CHECK_FALSE(kiwi::cpu::compute_ratios(a, times({90, 0, 60, 900, 0, 0, 0, 0})));
  CHECK_FALSE(kiwi::cpu::compute_ratios(a, a));
  const auto fully_busy = kiwi::cpu::compute_ratios(a, times({200, 0, 50, 850, 0, 0, 0, 0}));
  REQUIRE(fully_busy);
  CHECK(fully_busy->usage == 1.0);
}

TEST_CASE("cpu: loadavg and cpufreq text parse into numbers and hertz") {
  const auto load = kiwi::cpu::parse_loadavg(read_text(fixture("rk3588/proc/loadavg")));
  REQUIRE(load);
  CHECK(load->load1 == 1.27);
  CHECK(load->load5 == 0.94);
  CHECK(load->load15 == 0.71);
  CHECK_FALSE(kiwi::cpu::parse_loadavg("1.0 x 2.0"));
  CHECK(kiwi::cpu::parse_khz_as_hertz("2352000\n") == 2352000000.0);
  CHECK_FALSE(kiwi::cpu::parse_khz_as_hertz("<unknown>\n"));
}

TEST_CASE("cpu: the first sample on an RK3588 reports load and 8 core frequencies, no ratios") {
  Harness h(fixture("rk3588"), defaults());
  kiwi::cpu::CpuSensor sensor(h.context());
  const auto result = sensor.sample(h.sink);
  CHECK(result.status == kiwi::SampleStatus::ok);
  CHECK(result.message == "first sample: usage ratios need two readings");
  CHECK(h.sink.count("cpu_usage_ratio") == 0);
  CHECK(h.sink.count("cpu_core_usage_ratio") == 0);
  CHECK(h.sink.count("cpu_mode_ratio") == 0);
  CHECK(h.sink.label_values("cpu_frequency_hertz", "core") ==
        std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7"});
  CHECK(h.sink.value("cpu_frequency_hertz", {{"core", "0"}}) == 1200000000.0);  // A55 cluster
  CHECK(h.sink.value("cpu_frequency_hertz", {{"core", "4"}}) == 2352000000.0);  // A76 at max
  CHECK(h.sink.value("cpu_frequency_hertz", {{"core", "7"}}) == 408000000.0);
  CHECK(h.sink.find("cpu_frequency_hertz", {{"core", "4"}})->unit == "hertz");
  CHECK(h.sink.value("cpu_load1") == 1.27);
  CHECK(h.sink.value("cpu_load5") == 0.94);
  CHECK(h.sink.value("cpu_load15") == 0.71);
  CHECK(h.sink.find("cpu_load1")->unit.empty());
}

TEST_CASE("cpu: the second sample on an RK3588 gives usage per core and per mode") {
  ScratchTree tree("rk3588");
  Harness h(tree.root(), defaults());
  kiwi::cpu::CpuSensor sensor(h.context());
  sensor.sample(h.sink);
  tree.write("proc/stat", read_text(fixture("rk3588/next/proc/stat")));
  h.sink.clear();
  const auto result = sensor.sample(h.sink);
  CHECK(result.status == kiwi::SampleStatus::ok);
  CHECK(result.message.empty());
  CHECK(h.sink.value("cpu_usage_ratio") == Approx(0.32625));
  CHECK(h.sink.find("cpu_usage_ratio")->unit == "ratio");
  CHECK(h.sink.count("cpu_mode_ratio") == 8);
  CHECK(h.sink.value("cpu_mode_ratio", {{"mode", "user"}}) == Approx(0.25));
  CHECK(h.sink.value("cpu_mode_ratio", {{"mode", "idle"}}) == Approx(0.6675));
  CHECK(h.sink.value("cpu_mode_ratio", {{"mode", "steal"}}) == 0.0);
  const double per_core[] = {0.40, 0.15, 0.10, 0.0, 0.96, 0.60, 0.30, 0.10};
  for (int core = 0; core < 8; ++core) {
    INFO("core " << core);
    CHECK(h.sink.value("cpu_core_usage_ratio", {{"core", std::to_string(core)}}) ==
          Approx(per_core[core]).margin(1e-12));
  }
  CHECK(h.sink.count("cpu_frequency_hertz") == 8);
}

TEST_CASE("cpu: on a VM, steal is reported and guest time is not counted twice") {
  ScratchTree tree("vm");
  Harness h(tree.root(), defaults());
  kiwi::cpu::CpuSensor sensor(h.context());
  sensor.sample(h.sink);
  tree.write("proc/stat", read_text(fixture("vm/next/proc/stat")));
  h.sink.clear();
  sensor.sample(h.sink);
  // Deltas: user 60 (guest 10 inside) system 20 idle 100 iowait 2 softirq 3 steal 15 = 200 ticks.
  CHECK(h.sink.value("cpu_usage_ratio") == Approx(0.49));
  CHECK(h.sink.value("cpu_mode_ratio", {{"mode", "steal"}}) == Approx(0.075));
  CHECK(h.sink.value("cpu_mode_ratio", {{"mode", "user"}}) == Approx(0.30));
  CHECK(h.sink.value("cpu_core_usage_ratio", {{"core", "0"}}) == Approx(0.58));
  CHECK(h.sink.value("cpu_core_usage_ratio", {{"core", "1"}}) == Approx(0.40));
}

TEST_CASE("cpu: a VM without cpufreq reports no frequency and no complaint") {
  Harness h(fixture("vm"), defaults());
  kiwi::cpu::CpuSensor sensor(h.context());
  const auto result = sensor.sample(h.sink);
  CHECK(result.status == kiwi::SampleStatus::ok);
  CHECK(result.message == "first sample: usage ratios need two readings");
  CHECK(h.sink.count("cpu_frequency_hertz") == 0);
  CHECK(h.sink.value("cpu_load1") == 0.31);
}

TEST_CASE("cpu: counters that go backwards after resume give no ratio instead of garbage") {
  ScratchTree tree("rk3588");
  tree.write("proc/stat", read_text(fixture("rk3588/next/proc/stat")));
  Harness h(tree.root(), defaults());
  kiwi::cpu::CpuSensor sensor(h.context());
  sensor.sample(h.sink);
  tree.write("proc/stat", read_text(fixture("rk3588/proc/stat")));  // every counter went back
  h.sink.clear();
  const auto result = sensor.sample(h.sink);
  CHECK(result.status == kiwi::SampleStatus::ok);
  CHECK_THAT(result.message, Contains("backwards") && Contains("cpu0") && Contains("cpu7"));
  CHECK(h.sink.count("cpu_usage_ratio") == 0);
  CHECK(h.sink.count("cpu_mode_ratio") == 0);
  CHECK(h.sink.count("cpu_core_usage_ratio") == 0);
  CHECK(h.sink.count("cpu_load1") == 1);  // the rest of the sample still arrives
  CHECK(h.log.count(kiwi::LogLevel::info) == 1);

  // The lower reading became the baseline, so the next interval is measured normally again.
  tree.write("proc/stat", read_text(fixture("rk3588/next/proc/stat")));
  h.sink.clear();
  CHECK(sensor.sample(h.sink).message.empty());
  CHECK(h.sink.value("cpu_usage_ratio") == Approx(0.32625));
}

TEST_CASE("cpu: counters that do not advance are logged at info once, then at debug") {
  // A frozen /proc/stat (a fixture tree, a stopped VM): every sample after the first has no
  // ratio. The note is in every sample's message; the log has one info line, not one a sample.
  ScratchTree tree("rk3588");
  Harness h(tree.root(), defaults());
  kiwi::cpu::CpuSensor sensor(h.context());
  sensor.sample(h.sink);
  for (int i = 0; i < 4; ++i)
    CHECK_THAT(sensor.sample(h.sink).message, Contains("did not advance") && Contains("cpu0"));
  CHECK(h.log.count(kiwi::LogLevel::info) == 1);
  CHECK(h.log.count(kiwi::LogLevel::debug) == 3);
  // Advancing again, then stopping again: a new episode, at info again.
  tree.write("proc/stat", read_text(fixture("rk3588/next/proc/stat")));
  CHECK(sensor.sample(h.sink).message.empty());
  sensor.sample(h.sink);
  CHECK(h.log.count(kiwi::LogLevel::info) == 2);
}

TEST_CASE("cpu: a loadavg that is a FIFO or a device is refused with a note, not waited on") {
  ScratchTree tree("vm");
  tree.remove("proc/loadavg");
  const std::string path = tree.root() + "/proc/loadavg";
  SECTION("a FIFO (no writer: an open without O_NONBLOCK would wait for ever)") {
    REQUIRE(::mkfifo(path.c_str(), 0644) == 0);
  }
  SECTION("a character device that never ends (/dev/zero)") {
    std::filesystem::create_symlink("/dev/zero", path);
  }
  Harness h(tree.root(), defaults());
  kiwi::cpu::CpuSensor sensor(h.context());
  const auto result = sensor.sample(h.sink);
  CHECK(h.sink.count("cpu_load1") == 0);
  CHECK(h.sink.count("cpu_seconds_total") == 8);  // the rest of the sample is there
  CHECK_THAT(result.message, Contains(path + ": a ") && Contains("not a regular file"));
}

TEST_CASE("cpu: one core's counter going backwards skips only that core") {
  ScratchTree tree;
  tree.write("proc/stat", "cpu  200 0 0 1800\ncpu0 100 0 0 900\ncpu1 100 0 0 900\n");
  Harness h(tree.root(), defaults());
  kiwi::cpu::CpuSensor sensor(h.context());
  sensor.sample(h.sink);
  // cpu1's idle went back (a kernel accounting glitch); cpu0 moved by 10 busy + 90 idle ticks.
  tree.write("proc/stat", "cpu  310 0 0 1890\ncpu0 110 0 0 990\ncpu1 200 0 0 800\n");
  h.sink.clear();
  const auto result = sensor.sample(h.sink);
  CHECK(h.sink.value("cpu_core_usage_ratio", {{"core", "0"}}) == Approx(0.10));
  CHECK_FALSE(h.sink.value("cpu_core_usage_ratio", {{"core", "1"}}));
  CHECK(h.sink.value("cpu_usage_ratio") == Approx(110.0 / 200));
  CHECK_THAT(result.message, Contains("cpu1") && !Contains("cpu0"));
}

TEST_CASE("cpu: a core going offline and another coming online does not shift deltas") {
  ScratchTree tree;
  tree.write("proc/stat",
             "cpu  300 0 0 2700\ncpu0 100 0 0 900\ncpu1 100 0 0 900\ncpu2 100 0 0 900\n");
  Harness h(tree.root(), defaults());
  kiwi::cpu::CpuSensor sensor(h.context());
  sensor.sample(h.sink);
  // cpu1 went offline; cpu3 came online with its own (small) counters. If deltas were matched by
  // position, cpu2 would be compared with cpu1 and cpu3 with cpu2.
  tree.write("proc/stat",
             "cpu  380 0 0 2920\ncpu0 150 0 0 950\ncpu2 120 0 0 980\ncpu3 10 0 0 90\n");
  h.sink.clear();
  REQUIRE_NOTHROW(sensor.sample(h.sink));
  CHECK(h.sink.label_values("cpu_core_usage_ratio", "core") == std::vector<std::string>{"0", "2"});
  CHECK(h.sink.value("cpu_core_usage_ratio", {{"core", "0"}}) == Approx(0.5));
  CHECK(h.sink.value("cpu_core_usage_ratio", {{"core", "2"}}) == Approx(0.2));

  // Next interval cpu3 has a baseline and is reported.
  tree.write("proc/stat",
             "cpu  440 0 0 3160\ncpu0 160 0 0 1040\ncpu2 130 0 0 1070\ncpu3 50 0 0 150\n");
  h.sink.clear();
  sensor.sample(h.sink);
  CHECK(h.sink.value("cpu_core_usage_ratio", {{"core", "3"}}) == Approx(0.4));
}

TEST_CASE("cpu: per_core = false reports only the machine-wide numbers") {
  ScratchTree tree("rk3588");
  Harness h(tree.root(), kiwi_sensor_test::with_bool(defaults(), "per_core", false));
  kiwi::cpu::CpuSensor sensor(h.context());
  sensor.sample(h.sink);
  tree.write("proc/stat", read_text(fixture("rk3588/next/proc/stat")));
  sensor.sample(h.sink);
  CHECK(h.sink.count("cpu_usage_ratio") == 1);
  CHECK(h.sink.count("cpu_mode_ratio") == 8);
  CHECK(h.sink.count("cpu_core_usage_ratio") == 0);
  CHECK(h.sink.count("cpu_frequency_hertz") == 0);
}

TEST_CASE("cpu: the sensor reads nothing until sampled, then names a missing /proc/stat") {
  ScratchTree tree;
  Harness h(tree.root() + "/nowhere", defaults());
  kiwi::cpu::CpuSensor sensor(h.context());  // must not throw: nothing read yet
  CHECK_THROWS_WITH(sensor.sample(h.sink), Contains("/nowhere/proc/stat") && Contains("not found"));
}

TEST_CASE("cpu: a missing loadavg leaves out the load metrics and says so") {
  ScratchTree tree("vm");
  tree.remove("proc/loadavg");
  Harness h(tree.root(), defaults());
  kiwi::cpu::CpuSensor sensor(h.context());
  const auto result = sensor.sample(h.sink);
  CHECK(h.sink.count("cpu_load1") == 0);
  CHECK_THAT(result.message, Contains("loadavg: not found"));
}

TEST_CASE("cpu: offline cores, a core going offline and iowait going back on an old kernel") {
  // tests/fixtures/awkward: online 0-2,4-7, then cpu5 goes offline; cpu7's iowait goes back by 3
  // ticks (proc(5): "iowait ... can decrease"); the aggregate counts offline cores' frozen times.
  ScratchTree tree("awkward");
  Harness h(tree.root(), defaults());
  kiwi::cpu::CpuSensor sensor(h.context());
  sensor.sample(h.sink);
  tree.advance("awkward");
  h.sink.clear();
  const auto result = sensor.sample(h.sink);
  CHECK(result.message ==
        "counters went backwards or did not advance (suspend/resume?), no ratio for cpu7");
  CHECK(h.sink.label_values("cpu_core_usage_ratio", "core") ==
        std::vector<std::string>{"0", "1", "2", "4", "6"});
  const double per_core[] = {0.30, 0.15, 0.10, 0.60, 0.40};
  for (std::size_t i = 0; i < 5; ++i) {
    const std::string core = h.sink.label_values("cpu_core_usage_ratio", "core")[i];
    INFO("core " << core);
    CHECK(h.sink.value("cpu_core_usage_ratio", {{"core", core}}) ==
          Approx(per_core[i]).margin(1e-12));
  }
  // All cores: user 135 system 45 idle 418 iowait 2 of 600 ticks.
  CHECK(h.sink.value("cpu_usage_ratio") == Approx(180.0 / 600));
  CHECK(h.sink.value("cpu_mode_ratio", {{"mode", "iowait"}}) == Approx(2.0 / 600));
  CHECK(h.sink.count("cpu_frequency_hertz") == 0);  // the old BSP has no cpufreq in this tree
}

TEST_CASE("cpu: an x86 mini PC reports 4 cores with intel_pstate frequencies") {
  ScratchTree tree("x86");
  Harness h(tree.root(), defaults());
  kiwi::cpu::CpuSensor sensor(h.context());
  sensor.sample(h.sink);
  tree.advance("x86");
  h.sink.clear();
  CHECK(sensor.sample(h.sink).message.empty());
  CHECK(h.sink.value("cpu_usage_ratio") == Approx(0.30));
  CHECK(h.sink.value("cpu_core_usage_ratio", {{"core", "2"}}) == Approx(0.70));
  CHECK(h.sink.value("cpu_frequency_hertz", {{"core", "2"}}) == 3400000000.0);
}
