// devfreq plugin: the attributes' text, and the sensor on fixture boards: an RK3588's GPU, NPU
// and memory controller, a board without devfreq, an old one without `load`, a broken file.
#include <catch2/catch.hpp>

#include "devfreq_parse.hpp"
#include "devfreq_sensor.hpp"
#include "sensor_test_util.hpp"

using Catch::Matchers::Contains;
using kiwi_sensor_test::fixture;
using kiwi_sensor_test::Harness;
using kiwi_sensor_test::ScratchTree;
using namespace kiwi::devfreq;

TEST_CASE("devfreq: frequencies in hertz, and load as Rockchip's kernel writes it") {
  CHECK(parse_hertz("300000000\n") == 3e8);
  CHECK_FALSE(parse_hertz("fast\n"));
  CHECK_FALSE(parse_hertz(""));
  CHECK(parse_load("23@300000000Hz\n") == 0.23);
  CHECK(parse_load("0@1000000000Hz") == 0.0);
  CHECK(parse_load("100@1Hz") == 1.0);
  for (const char* bad : {"23", "23@300000000", "101@1Hz", "x@1Hz", "23@xHz", ""}) {
    INFO(bad);
    CHECK_FALSE(parse_load(bad));
  }
}

TEST_CASE("devfreq: an RK3588's GPU, NPU and memory controller, in name order") {
  Harness h(fixture("rk3588"));
  DevfreqSensor sensor(h.context());
  const auto r = h.sample(sensor);
  CHECK(r.status == kiwi::SampleStatus::ok);
  CHECK(r.message.empty());
  CHECK(h.sink.label_values("devfreq_frequency_hertz", "device") ==
        std::vector<std::string>{"dmc", "fb000000.gpu", "fdab0000.npu"});
  CHECK(h.sink.value("devfreq_load_ratio", {{"device", "fb000000.gpu"}}) == 0.23);
  CHECK(h.sink.value("devfreq_frequency_hertz", {{"device", "fb000000.gpu"}}) == 3e8);
  CHECK(h.sink.value("devfreq_max_frequency_hertz", {{"device", "dmc"}}) == 2.112e9);
  CHECK(h.sink.value("devfreq_min_frequency_hertz", {{"device", "fdab0000.npu"}}) == 3e8);
}

TEST_CASE("devfreq: a board without devfreq is no data, a device without load has the rest") {
  Harness pi(fixture("rpi4"));
  DevfreqSensor none(pi.context());
  const auto r = pi.sample(none);
  CHECK(r.status == kiwi::SampleStatus::no_data);
  CHECK_THAT(r.message, Contains("no devfreq devices: " + pi.sysfs + "/class/devfreq"));
  Harness old(fixture("awkward"));
  DevfreqSensor gpu(old.context());
  CHECK(old.sample(gpu).status == kiwi::SampleStatus::ok);
  CHECK(old.sink.value("devfreq_max_frequency_hertz", {{"device", "ff9a0000.gpu"}}) == 4e8);
  CHECK(old.sink.count("devfreq_load_ratio") == 0);
}

TEST_CASE("devfreq: a file that cannot be read or parsed is named, the rest arrives") {
  ScratchTree tree("rk3588");
  tree.make_unreadable("sys/class/devfreq/fdab0000.npu/cur_freq");
  tree.write("sys/class/devfreq/dmc/load", "busy\n");
  Harness h(tree.root());
  DevfreqSensor sensor(h.context());
  const auto r = h.sample(sensor);
  CHECK(r.status == kiwi::SampleStatus::ok);
  CHECK_THAT(r.message,
             Contains("fdab0000.npu/cur_freq") && Contains("dmc/load: not a value: 'busy\\x0a'"));
  CHECK_FALSE(h.sink.value("devfreq_frequency_hertz", {{"device", "fdab0000.npu"}}));
  CHECK(h.sink.value("devfreq_max_frequency_hertz", {{"device", "fdab0000.npu"}}) == 1e9);
  CHECK(h.sink.count("devfreq_load_ratio") == 2);
  CHECK(h.log.count(kiwi::LogLevel::warn) == 1);
  h.sample(sensor);  // the same: not logged again
  CHECK(h.log.count(kiwi::LogLevel::warn) == 1);
}
