// pressure plugin: PSI, vmstat and btime parsing, and the sensor on fixture boards: what each
// board's kernel has, a missing, unreadable or damaged file, PSI switched off.
#include <catch2/catch.hpp>

#include "pressure_parse.hpp"
#include "pressure_sensor.hpp"
#include "sensor_test_util.hpp"

using Catch::Matchers::Contains;
using kiwi_sensor_test::fixture;
using kiwi_sensor_test::Harness;
using kiwi_sensor_test::read_text;
using kiwi_sensor_test::ScratchTree;
using namespace kiwi::pressure;

TEST_CASE("pressure: a PSI file's some and full lines, as psi.rst shows them") {
  const Psi p = parse_psi(
      "some avg10=0.12 avg60=5.50 avg300=100.00 total=123456\n"
      "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
  REQUIRE(p.some);
  CHECK(p.some->avg10 == 0.0012);  // as ratios, the doubles nearest the percentages / 100
  CHECK(p.some->avg60 == 0.055);
  CHECK(p.some->avg300 == 1.0);
  CHECK(p.some->total_us == 123456);
  REQUIRE(p.full);
  CHECK(p.full->total_us == 0);
  // Linux before 5.13: cpu has no full line. A line of another kind, and a field a later kernel
  // may add, are skipped.
  const Psi old = parse_psi(read_text(fixture("rk3588/proc/pressure/cpu")));
  CHECK(old.some);
  CHECK_FALSE(old.full);
  CHECK(parse_psi("some avg10=1 avg60=2 avg300=3 total=4 avg1800=5\nnew x=1\n").some->avg60 ==
        0.02);
  CHECK_FALSE(parse_psi("").some);
}

TEST_CASE("pressure: a damaged PSI line is refused, naming it") {
  for (const char* bad :
       {"some avg10=0.12 avg60=0.05 total=1\n",
        "some avg10=x avg60=0 avg300=0 "
        "total=1\n",
        "full avg10=0 avg60=0 avg300=0 total=-1\n", "some avg10 avg60=0\n",
        "some avg10=101 avg60=0 avg300=0 total=1\n", "some avg10=0.125 avg60=0 avg300=0 total=1\n",
        "some avg10=-1.00 avg60=0 avg300=0 total=1\n"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_psi(bad), std::invalid_argument);
  }
  CHECK_THROWS_WITH(parse_psi("some avg10=x avg60=0 avg300=0 total=1\n"),
                    "line 'some avg10=x avg60=0 avg300=0 total=1': avg10 is not a percentage");
}

TEST_CASE("pressure: vmstat's kept counters, absent where the kernel has no line") {
  const VmEvents vm = parse_vmstat(read_text(fixture("rpi4/proc/vmstat")));
  CHECK(vm.oom_kill == 1u);
  CHECK(vm.pgmajfault == 52118u);
  CHECK(vm.pswpin == 1804u);
  CHECK(vm.pswpout == 9917u);
  CHECK_FALSE(parse_vmstat(read_text(fixture("awkward/proc/vmstat"))).oom_kill);  // Linux 4.4
  CHECK_FALSE(parse_vmstat("nr_free_pages 12\nnonsense\n").pgmajfault);
  CHECK_THROWS_WITH(parse_vmstat("oom_kill many\n"), Contains("oom_kill many"));
}

TEST_CASE("pressure: btime from /proc/stat") {
  CHECK(parse_btime(read_text(fixture("rpi4/proc/stat"))).has_value());
  CHECK(parse_btime("cpu 1 2 3\nbtime 1764460800\n") == 1764460800u);
  CHECK_FALSE(parse_btime("cpu 1 2 3\n"));
  CHECK_THROWS(parse_btime("btime soon\n"));
}

TEST_CASE("pressure: a Raspberry Pi 4 on an SD card: io pressure, swap traffic, an OOM kill") {
  ScratchTree tree("rpi4");
  Harness h(tree.root());
  PressureSensor sensor(h.context());
  CHECK(h.sample(sensor).status == kiwi::SampleStatus::ok);
  CHECK(h.sink.value("pressure_some_ratio", {{"resource", "io"}, {"window", "10s"}}) == 0.125);
  CHECK(h.sink.value("pressure_full_ratio", {{"resource", "io"}, {"window", "300s"}}) == 0.0375);
  CHECK(h.sink.value("pressure_some_stalled_seconds_total", {{"resource", "io"}}) == 913.375218);
  CHECK(h.sink.value("pressure_full_ratio", {{"resource", "cpu"}, {"window", "60s"}}) == 0);
  CHECK(h.sink.count("pressure_some_ratio") == 9);  // 3 resources x 3 windows
  CHECK(h.sink.count("pressure_full_ratio") == 9);
  CHECK(h.sink.value("vm_oom_kills_total") == 1);
  CHECK(h.sink.value("vm_major_faults_total") == 52118);
  CHECK(h.sink.value("boot_time_seconds").value_or(0) > 1.5e9);
  // One second later (next/): the rates are the deltas.
  tree.advance("rpi4");
  h.sink.clear();
  CHECK(h.sample(sensor).message.empty());
  CHECK(h.sink.value("vm_major_faults_per_second") == 12);
  CHECK(h.sink.value("vm_swap_in_pages_per_second") == 2);
  CHECK(h.sink.value("vm_swap_out_pages_per_second") == 8);
}

TEST_CASE("pressure: an RK3588's 5.10 kernel has no full line for cpu") {
  Harness h(fixture("rk3588"));
  PressureSensor sensor(h.context());
  CHECK(h.sample(sensor).status == kiwi::SampleStatus::ok);
  CHECK(h.sink.label_values("pressure_full_ratio", "resource") ==
        std::vector<std::string>{"memory", "memory", "memory", "io", "io", "io"});
  CHECK(h.sink.value("pressure_some_ratio", {{"resource", "cpu"}, {"window", "300s"}}) == 0.0075);
}

TEST_CASE(
    "pressure: an old kernel without PSI is ok with a note, and vmstat and btime still come") {
  Harness h(fixture("awkward"));
  PressureSensor sensor(h.context());
  const auto r = h.sample(sensor);
  CHECK(r.status == kiwi::SampleStatus::ok);
  CHECK_THAT(r.message, Catch::StartsWith("no pressure stall information: " + h.procfs +
                                          "/pressure is missing (a kernel before 4.20, or built "
                                          "without CONFIG_PSI)"));
  CHECK(h.sink.count("pressure_some_ratio") == 0);
  CHECK_FALSE(h.sink.value("vm_oom_kills_total"));  // no oom_kill line in Linux 4.4
  CHECK(h.sink.value("vm_major_faults_total") == 77);
}

TEST_CASE("pressure: nothing to read is no data, not an error") {
  ScratchTree empty;
  Harness h(empty.root());
  PressureSensor sensor(h.context());
  const auto r = h.sample(sensor);
  CHECK(r.status == kiwi::SampleStatus::no_data);
  CHECK_THAT(r.message, Contains("no pressure stall information"));
}

TEST_CASE("pressure: an unreadable or damaged file is named and left out, the rest arrives") {
  ScratchTree tree("x86");
  tree.make_unreadable("proc/pressure/memory");
  tree.write("proc/pressure/io", "some avg10=garbage\n");
  Harness h(tree.root());
  PressureSensor sensor(h.context());
  const auto r = h.sample(sensor);
  CHECK(r.status == kiwi::SampleStatus::ok);
  CHECK_THAT(r.message, Contains(h.procfs + "/pressure/memory") &&
                            Contains(h.procfs + "/pressure/io: line 'some avg10=garbage'"));
  CHECK(h.sink.label_values("pressure_some_stalled_seconds_total", "resource") ==
        std::vector<std::string>{"cpu"});
  CHECK(h.sink.value("vm_major_faults_total") == 1210);
  CHECK(h.log.count(kiwi::LogLevel::warn) == 1);
  h.sample(sensor);  // the same failure: logged once
  CHECK(h.log.count(kiwi::LogLevel::warn) == 1);
  // Every file failing: an error naming them.
  for (const char* f : {"proc/pressure/cpu", "proc/vmstat", "proc/stat"}) tree.make_unreadable(f);
  CHECK_THROWS_WITH(h.sample(sensor), Contains("/proc/vmstat") && Contains("/proc/stat"));
}
