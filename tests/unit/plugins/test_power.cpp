// power plugin: the Raspberry Pi firmware's throttling word and the rpi_volt alarm, on the Pi 4
// fixture, on boards without them, and when the files are damaged.
#include <catch2/catch.hpp>

#include "power_parse.hpp"
#include "power_sensor.hpp"
#include "sensor_test_util.hpp"

using Catch::Matchers::Contains;
using kiwi_sensor_test::fixture;
using kiwi_sensor_test::Harness;
using kiwi_sensor_test::ScratchTree;
using namespace kiwi::power;

TEST_CASE("power: the throttling word in hex, with or without 0x") {
  CHECK(parse_throttled("50005\n") == 0x50005u);
  CHECK(parse_throttled("0x0") == 0u);
  CHECK(parse_throttled("0X80008\n") == 0x80008u);
  for (const char* bad : {"", "0x", "zz", "50005 x", "-1"}) {
    INFO(bad);
    CHECK_FALSE(parse_throttled(bad));
  }
}

TEST_CASE("power: a Pi 4 that was under-powered and throttled since boot, not now") {
  Harness h(fixture("rpi4"));
  PowerSensor sensor(h.context());
  const auto r = h.sample(sensor);
  CHECK(r.status == kiwi::SampleStatus::ok);
  CHECK(r.message.empty());
  auto flag = [&](const char* f, const char* when) {
    return h.sink.value("power_throttle_flag", {{"flag", f}, {"when", when}});
  };
  CHECK(flag("under_voltage", "now") == 0);
  CHECK(flag("under_voltage", "since_boot") == 1);
  CHECK(flag("throttled", "since_boot") == 1);
  CHECK(flag("frequency_capped", "since_boot") == 0);
  CHECK(flag("soft_temperature_limit", "now") == 0);
  CHECK(h.sink.count("power_throttle_flag") == 8);
  CHECK(h.sink.value("power_under_voltage_alarm") == 0);
}

TEST_CASE("power: a word with every condition now, and a Pi 5's firmware path") {
  ScratchTree tree;
  tree.write("sys/devices/platform/soc@107c000000/soc@107c000000:firmware/get_throttled",
             "f000f\n");
  Harness h(tree.root());
  PowerSensor sensor(h.context());
  CHECK(h.sample(sensor).status == kiwi::SampleStatus::ok);
  for (const char* f : {"under_voltage", "frequency_capped", "throttled", "soft_temperature_limit"})
    for (const char* when : {"now", "since_boot"}) {
      INFO(f << " " << when);
      CHECK(h.sink.value("power_throttle_flag", {{"flag", f}, {"when", when}}) == 1);
    }
  CHECK(h.sink.count("power_under_voltage_alarm") == 0);  // no rpi_volt here
}

TEST_CASE("power: a healthy Pi 5 under soc@107c000000, with its rpi_volt") {
  Harness h(fixture("rpi5"));
  PowerSensor sensor(h.context());
  const auto r = h.sample(sensor);
  CHECK(r.status == kiwi::SampleStatus::ok);
  CHECK(r.message.empty());
  CHECK(h.sink.count("power_throttle_flag") == 8);
  for (const char* f : {"under_voltage", "frequency_capped", "throttled", "soft_temperature_limit"})
    for (const char* when : {"now", "since_boot"}) {
      INFO(f << " " << when);
      CHECK(h.sink.value("power_throttle_flag", {{"flag", f}, {"when", when}}) == 0);
    }
  CHECK(h.sink.value("power_under_voltage_alarm") == 0);
}

TEST_CASE("power: another board is no data, and damaged or unreadable files are named") {
  Harness x86(fixture("x86"));
  PowerSensor none(x86.context());
  const auto r = x86.sample(none);
  CHECK(r.status == kiwi::SampleStatus::no_data);
  CHECK_THAT(r.message, Contains("no Raspberry Pi power reporting"));

  ScratchTree tree("rpi4");
  tree.write("sys/devices/platform/soc/soc:firmware/get_throttled", "throttled\n");
  Harness h(tree.root());
  PowerSensor sensor(h.context());
  const auto bad = h.sample(sensor);
  CHECK(bad.status == kiwi::SampleStatus::ok);  // the alarm still came
  CHECK_THAT(bad.message, Contains("get_throttled: not a hex word: 'throttled\\x0a'"));
  CHECK(h.sink.value("power_under_voltage_alarm") == 0);
  tree.make_unreadable("sys/class/hwmon/hwmon1/in0_lcrit_alarm");
  CHECK_THROWS_WITH(h.sample(sensor), Contains("get_throttled") && Contains("in0_lcrit_alarm"));
}
