// thermal plugin: millidegree parsing, naming rules, and the sensor on fixture boards (RK3588 with
// 7 zones, Raspberry Pi 4 with one, a VM with none, an x86 laptop with hwmon only).
#include <catch2/catch.hpp>
#include <charconv>
#include <filesystem>

#include "sensor_test_util.hpp"
#include "thermal_parse.hpp"
#include "thermal_sensor.hpp"

using Catch::Matchers::Contains;
using kiwi_sensor_test::fixture;
using kiwi_sensor_test::Harness;
using kiwi_sensor_test::ScratchTree;

namespace {

std::vector<kiwi::OptionValue> defaults() {
  return kiwi_sensor_test::default_values(kiwi::thermal::kOptions);
}

}  // namespace

TEST_CASE("thermal: millidegree text becomes exact degrees Celsius") {
  CHECK(kiwi::thermal::parse_millidegrees("45250\n") == 45.25);
  CHECK(kiwi::thermal::parse_millidegrees("42525\n") == 42.525);
  CHECK(kiwi::thermal::parse_millidegrees("-5000") == -5.0);  // outdoor boards freeze too
  CHECK(kiwi::thermal::parse_millidegrees("0\n") == 0.0);
  CHECK_FALSE(kiwi::thermal::parse_millidegrees(""));
  CHECK_FALSE(kiwi::thermal::parse_millidegrees("45.2\n"));
  CHECK_FALSE(kiwi::thermal::parse_millidegrees("N/A"));
}

TEST_CASE("thermal: hwmon sensors are named chip_label, or chip_tempN without a label") {
  CHECK(kiwi::thermal::hwmon_sensor_name("coretemp", "Package id 0", 1) == "coretemp_Package id 0");
  CHECK(kiwi::thermal::hwmon_sensor_name("iwlwifi_1", "", 1) == "iwlwifi_1_temp1");
  CHECK(kiwi::thermal::thermal_zone_hwmon_name("bigcore0-thermal") == "bigcore0_thermal");
}

TEST_CASE("thermal: an RK3588 reports its 7 zones by name, once each, and the maximum") {
  Harness h(fixture("rk3588"), defaults());
  kiwi::thermal::ThermalSensor sensor(h.context());
  const auto result = sensor.sample(h.sink);
  CHECK(result.status == kiwi::SampleStatus::ok);
  CHECK(result.message.empty());
  // The fixture also has the kernel's hwmon mirror of every zone (soc_thermal, ...): not repeated.
  CHECK(h.sink.label_values("thermal_celsius", "sensor") ==
        std::vector<std::string>{"soc-thermal", "bigcore0-thermal", "bigcore1-thermal",
                                 "littlecore-thermal", "center-thermal", "gpu-thermal",
                                 "npu-thermal"});
  CHECK(h.sink.value("thermal_celsius", {{"sensor", "soc-thermal"}}) == 41.6);
  CHECK(h.sink.value("thermal_celsius", {{"sensor", "gpu-thermal"}}) == 40.675);
  CHECK(h.sink.find("thermal_celsius", {{"sensor", "npu-thermal"}})->unit == "celsius");
  CHECK(h.sink.value("thermal_max_celsius") == 43.45);  // bigcore1-thermal
}

TEST_CASE("thermal: a Raspberry Pi 4 reports cpu-thermal once, ignoring rpi_volt") {
  Harness h(fixture("rpi4"), defaults());
  kiwi::thermal::ThermalSensor sensor(h.context());
  CHECK(sensor.sample(h.sink).status == kiwi::SampleStatus::ok);
  CHECK(h.sink.label_values("thermal_celsius", "sensor") ==
        std::vector<std::string>{"cpu-thermal"});
  CHECK(h.sink.value("thermal_celsius", {{"sensor", "cpu-thermal"}}) == 47.722);
  CHECK(h.sink.value("thermal_max_celsius") == 47.722);
}

TEST_CASE("thermal: a Raspberry Pi 5: the fan's active trips are no limit, its state is reported") {
  // tests/fixtures/rpi5: bcm2712's critical trip at 110 °C, the Pi 5 board's four active trips
  // (50, 60, 67.5, 75 °C) stepping the Active Cooler's pwm-fan; at 52.65 °C it is at state 1.
  Harness h(fixture("rpi5"), defaults());
  kiwi::thermal::ThermalSensor sensor(h.context());
  CHECK(sensor.sample(h.sink).status == kiwi::SampleStatus::ok);
  CHECK(h.sink.label_values("thermal_celsius", "sensor") ==
        std::vector<std::string>{"cpu-thermal", "rp1_adc_temp1", "nvme_Composite"});
  CHECK(h.sink.value("thermal_celsius", {{"sensor", "cpu-thermal"}}) == 52.65);
  CHECK(h.sink.value("thermal_celsius", {{"sensor", "rp1_adc_temp1"}}) == 61.282);
  CHECK(h.sink.value("thermal_max_celsius") == 61.282);
  CHECK(h.sink.value("thermal_critical_celsius", {{"sensor", "cpu-thermal"}}) == 110.0);
  CHECK_FALSE(h.sink.value("thermal_high_celsius", {{"sensor", "cpu-thermal"}}));
  CHECK(h.sink.value("thermal_high_celsius", {{"sensor", "nvme_Composite"}}) == 81.85);
  CHECK(h.sink.label_values("thermal_cooling_state", "device") ==
        std::vector<std::string>{"pwm-fan"});
  CHECK(h.sink.value("thermal_cooling_state", {{"device", "pwm-fan"}}) == 1.0);
  CHECK(h.sink.value("thermal_cooling_max_state", {{"device", "pwm-fan"}}) == 4.0);
}

TEST_CASE("thermal: a VM without thermal zones reports no data, not an error") {
  Harness h(fixture("vm"), defaults());
  kiwi::thermal::ThermalSensor sensor(h.context());
  kiwi::SampleResult result;
  REQUIRE_NOTHROW(result = sensor.sample(h.sink));
  CHECK(result.status == kiwi::SampleStatus::no_data);
  CHECK(result.message == "no thermal zones or hwmon sensors");
  CHECK(h.sink.samples.empty());
  CHECK(h.log.lines.empty());
}

TEST_CASE(
    "thermal: an x86 machine with hwmon only reports coretemp, both NVMe drives and the Super I/O "
    "chip") {
  Harness h(fixture("x86"), defaults());
  kiwi::thermal::ThermalSensor sensor(h.context());
  CHECK(sensor.sample(h.sink).status == kiwi::SampleStatus::ok);
  CHECK(h.sink.label_values("thermal_celsius", "sensor") ==
        std::vector<std::string>{
            "nvme_Composite", "nvme_Sensor 1", "nvme_Sensor 2", "nvme_Composite_2",
            "coretemp_Package id 0", "coretemp_Core 0", "coretemp_Core 1", "coretemp_Core 2",
            "coretemp_Core 3", "iwlwifi_1_temp1", "it8613_temp1", "it8613_temp2", "it8613_temp3"});
  // The it8613's third input has no thermistor wired: -128 °C, as the chip reads it.
  CHECK(h.sink.value("thermal_celsius", {{"sensor", "it8613_temp3"}}) == -128.0);
  CHECK(h.sink.value("thermal_celsius", {{"sensor", "nvme_Composite_2"}}) == 35.85);
  CHECK(h.sink.value("thermal_celsius", {{"sensor", "coretemp_Package id 0"}}) == 52.0);
  CHECK(h.sink.value("thermal_max_celsius") == 52.0);
}

TEST_CASE("thermal: a zone whose read fails is skipped and named, the others still arrive") {
  ScratchTree tree("rk3588");
  tree.make_unreadable("sys/class/thermal/thermal_zone5/temp");  // gpu-thermal
  Harness h(tree.root(), defaults());
  kiwi::thermal::ThermalSensor sensor(h.context());
  const auto result = sensor.sample(h.sink);
  CHECK(result.status == kiwi::SampleStatus::ok);
  CHECK_THAT(result.message, Contains("gpu-thermal") && Contains("thermal_zone5/temp"));
  CHECK(h.sink.count("thermal_celsius") == 6);
  CHECK_FALSE(h.sink.value("thermal_celsius", {{"sensor", "gpu-thermal"}}));
  CHECK(h.sink.value("thermal_max_celsius") == 43.45);
  CHECK(h.log.count(kiwi::LogLevel::warn) == 1);

  // Logged once when it starts failing, not every second.
  sensor.sample(h.sink);
  CHECK(h.log.count(kiwi::LogLevel::warn) == 1);
}

TEST_CASE("thermal: when every sensor fails the sample is an error, not no data") {
  ScratchTree tree("rpi4");
  tree.make_unreadable("sys/class/thermal/thermal_zone0/temp");
  Harness h(tree.root(), defaults());
  kiwi::thermal::ThermalSensor sensor(h.context());
  CHECK_THROWS_WITH(sensor.sample(h.sink),
                    Contains("all thermal sensors failed") && Contains("cpu-thermal"));
}

TEST_CASE("thermal: a temperature that is not a number is skipped with its text") {
  ScratchTree tree("x86");
  tree.write("sys/class/hwmon/hwmon4/temp1_input", "N/A\n");
  Harness h(tree.root(), defaults());
  kiwi::thermal::ThermalSensor sensor(h.context());
  const auto result = sensor.sample(h.sink);
  CHECK_THAT(result.message, Contains("iwlwifi_1_temp1") && Contains("'N/A'"));
  CHECK(h.sink.count("thermal_celsius") == 12);
}

TEST_CASE("thermal: a temperature of binary garbage is quoted short and escaped") {
  // Quoted whole, it put raw bytes and newlines into the snapshot, the API and the log.
  ScratchTree tree("rpi4");
  std::string garbage;
  for (int i = 0; i < 5000; ++i) garbage.push_back(static_cast<char>((i * 131 + 7) % 256));
  tree.write("sys/class/thermal/thermal_zone0/temp", "4\n\x1b[2J" + garbage);
  Harness h(tree.root(), defaults());
  kiwi::thermal::ThermalSensor sensor(h.context());
  try {
    sensor.sample(h.sink);
    FAIL("garbage read as a temperature");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK_THAT(
        what, Contains("not a millidegree value: '4\\x0a\\x1b[2J") && Contains("'...(5006 bytes)"));
    CHECK(what.size() < 700);
    for (unsigned char c : what) CHECK((c >= 0x20 && c < 0x7f));
  }
  CHECK(h.log.count(kiwi::LogLevel::warn) == 1);
  CHECK(h.log.lines.at(0).second.size() < 700);
}

TEST_CASE("thermal: a 100 MB temperature file is refused at the read cap, not read or quoted") {
  ScratchTree tree("rpi4");
  const std::string temp = tree.root() + "/sys/class/thermal/thermal_zone0/temp";
  std::filesystem::resize_file(temp, 100 * 1024 * 1024);  // sparse, as `truncate -s 100M` makes
  Harness h(tree.root(), defaults());
  kiwi::thermal::ThermalSensor sensor(h.context());
  CHECK_THROWS_WITH(sensor.sample(h.sink),
                    Contains("cpu-thermal (" + temp + ": larger than the read cap of 256 KiB"));
}

TEST_CASE("thermal: excluded sensors are not reported and do not rename the others") {
  Harness h(fixture("x86"), kiwi_sensor_test::with_strings(defaults(), "exclude",
                                                           {"nvme_Composite", "iwlwifi_1_temp1"}));
  kiwi::thermal::ThermalSensor sensor(h.context());
  sensor.sample(h.sink);
  CHECK(h.sink.count("thermal_celsius") == 11);
  CHECK_FALSE(h.sink.value("thermal_celsius", {{"sensor", "nvme_Composite"}}));
  CHECK(h.sink.value("thermal_celsius", {{"sensor", "nvme_Composite_2"}}) == 35.85);
}

TEST_CASE("thermal: exclude takes globs, as every include/exclude option does") {
  Harness h(fixture("x86"), kiwi_sensor_test::with_strings(defaults(), "exclude", {"nvme*"}));
  kiwi::thermal::ThermalSensor sensor(h.context());
  sensor.sample(h.sink);
  CHECK(h.sink.count("thermal_celsius") == 9);  // 13 on this board, 4 of them nvme_*
  CHECK_FALSE(h.sink.value("thermal_celsius", {{"sensor", "nvme_Composite"}}));
  CHECK_FALSE(h.sink.value("thermal_celsius", {{"sensor", "nvme_Sensor 1"}}));
  CHECK_FALSE(h.sink.value("thermal_celsius", {{"sensor", "nvme_Composite_2"}}));
  CHECK(h.sink.value("thermal_celsius", {{"sensor", "iwlwifi_1_temp1"}}));
}

TEST_CASE("thermal: excluding every sensor is no data with a reason") {
  Harness h(fixture("rpi4"),
            kiwi_sensor_test::with_strings(defaults(), "exclude", {"cpu-thermal"}));
  kiwi::thermal::ThermalSensor sensor(h.context());
  const auto result = sensor.sample(h.sink);
  CHECK(result.status == kiwi::SampleStatus::no_data);
  CHECK_THAT(result.message, Contains("exclude"));
}

TEST_CASE("thermal: every millidegree reading converts to exactly the decimal the kernel meant") {
  // What a user sees is the shortest text of the double (/metrics prints it so): -40.000 to
  // 150.000 °C must come out as the same digits, never 45.123000000000005.
  std::vector<std::string> wrong;
  for (int milli = -40000; milli <= 150000; ++milli) {
    const auto celsius = kiwi::thermal::parse_millidegrees(std::to_string(milli) + "\n");
    char buf[32];
    const std::string shortest =
        celsius ? std::string(buf, std::to_chars(buf, buf + sizeof buf, *celsius).ptr) : "none";
    std::string expected = std::to_string(milli / 1000) + "." +
                           std::to_string(std::abs(milli % 1000) + 1000).substr(1);
    if (milli < 0 && milli > -1000) expected = "-" + expected;
    while (expected.back() == '0') expected.pop_back();  // 45.250 prints as 45.25, 45.000 as 45
    if (expected.back() == '.') expected.pop_back();
    if (expected == "-0") expected = "0";
    if (shortest != expected && wrong.size() < 5)
      wrong.push_back(expected + " read as " + shortest);
  }
  CHECK(wrong.empty());
}

TEST_CASE("thermal: a sensor whose read fails with EIO is skipped and named with the error") {
  // /proc/self/mem read at offset 0 fails with EIO, exactly as a flaky I2C sensor's read does.
  ScratchTree tree("rk3588");
  tree.remove("sys/class/thermal/thermal_zone6/temp");  // npu-thermal
  std::filesystem::create_symlink("/proc/self/mem",
                                  tree.root() + "/sys/class/thermal/thermal_zone6/temp");
  Harness h(tree.root(), defaults());
  kiwi::thermal::ThermalSensor sensor(h.context());
  const auto result = sensor.sample(h.sink);
  CHECK(result.status == kiwi::SampleStatus::ok);
  CHECK_THAT(result.message, Contains("skipped npu-thermal") && Contains("Input/output error"));
  CHECK(h.sink.count("thermal_celsius") == 6);
  CHECK(h.sink.value("thermal_max_celsius") == 43.45);
}

TEST_CASE("thermal: duplicate hwmon names follow the device, not the hwmon number of this boot") {
  // On this boot the kernel probed the second NVMe drive (PCI 0000:02:00.0) first: it is hwmon1.
  // Its sensors are still the _2 ones, because names follow the device path, which is stable.
  ScratchTree tree("x86");
  const std::string devices = tree.root() + "/sys/devices/pci0000:00";
  std::filesystem::create_directories(devices + "/0000:00:1d.0/0000:01:00.0/nvme/nvme0");
  std::filesystem::create_directories(devices + "/0000:00:1d.4/0000:02:00.0/nvme/nvme1");
  std::filesystem::create_directory_symlink(
      "../../../devices/pci0000:00/0000:00:1d.4/0000:02:00.0/nvme/nvme1",
      tree.root() + "/sys/class/hwmon/hwmon1/device");
  std::filesystem::create_directory_symlink(
      "../../../devices/pci0000:00/0000:00:1d.0/0000:01:00.0/nvme/nvme0",
      tree.root() + "/sys/class/hwmon/hwmon2/device");
  Harness h(tree.root(), defaults());
  kiwi::thermal::ThermalSensor sensor(h.context());
  sensor.sample(h.sink);
  // hwmon2 (nvme0, one sensor at 35.85 °C) is now nvme_Composite; hwmon1's three are the _2s.
  CHECK(h.sink.value("thermal_celsius", {{"sensor", "nvme_Composite"}}) == 35.85);
  CHECK(h.sink.value("thermal_celsius", {{"sensor", "nvme_Composite_2"}}));
  CHECK(h.sink.value("thermal_celsius", {{"sensor", "nvme_Sensor 1"}}));
  CHECK(h.sink.count("thermal_celsius") == 13);
}

TEST_CASE("thermal: an unreadable zone among five is named, the other four and the max arrive") {
  // tests/fixtures/awkward: thermal_zone2/temp is a directory, so read() fails as EIO would.
  Harness h(fixture("awkward"), defaults());
  kiwi::thermal::ThermalSensor sensor(h.context());
  const auto result = sensor.sample(h.sink);
  CHECK(result.status == kiwi::SampleStatus::ok);
  CHECK_THAT(result.message, Contains("skipped cpu2-thermal") && Contains("thermal_zone2/temp"));
  CHECK(h.sink.label_values("thermal_celsius", "sensor") ==
        std::vector<std::string>{"cpu0-thermal", "cpu1-thermal", "cpu3-thermal", "gpu-thermal"});
  CHECK(h.sink.value("thermal_max_celsius") == 53.0);
}

TEST_CASE("thermal: sensor names are the same from one start of the agent to the next") {
  Harness h(fixture("x86"), defaults());
  kiwi::thermal::ThermalSensor first(h.context());
  first.sample(h.sink);
  const auto before = h.sink.label_values("thermal_celsius", "sensor");
  h.sink.clear();
  kiwi::thermal::ThermalSensor restarted(h.context());
  restarted.sample(h.sink);
  CHECK(h.sink.label_values("thermal_celsius", "sensor") == before);
}

TEST_CASE(
    "thermal: a sensor that went away is dropped, and the sensors are listed anew at the "
    "next sample") {
  // Between discoveries (every 10 s) only the temperature files are read; a zone unplugged makes
  // the next sample list them again, which also finds one plugged in meanwhile.
  ScratchTree tree("rk3588");
  Harness h(tree.root(), defaults());
  kiwi::thermal::ThermalSensor sensor(h.context());
  sensor.sample(h.sink);
  CHECK(h.sink.count("thermal_celsius") == 7);
  tree.write("sys/class/thermal/thermal_zone7/type", "usb-thermal\n");
  tree.write("sys/class/thermal/thermal_zone7/temp", "30000\n");
  h.sink.clear();
  sensor.sample(h.sink);
  CHECK(h.sink.count("thermal_celsius") == 7);  // not listed again yet
  tree.remove("sys/class/thermal/thermal_zone6");
  h.sink.clear();
  sensor.sample(h.sink);  // npu-thermal's file is gone: skipped, and a new listing is due
  CHECK(h.sink.count("thermal_celsius") == 6);
  h.sink.clear();
  const auto result = sensor.sample(h.sink);
  CHECK(result.message.empty());
  CHECK(h.sink.value("thermal_celsius", {{"sensor", "usb-thermal"}}) == 30.0);
  // What a sensor made now finds: the same sensors, under the same names.
  Harness fresh_h(tree.root(), defaults());
  kiwi::thermal::ThermalSensor fresh(fresh_h.context());
  fresh.sample(fresh_h.sink);
  CHECK(h.sink.label_values("thermal_celsius", "sensor") ==
        fresh_h.sink.label_values("thermal_celsius", "sensor"));
}

TEST_CASE("thermal: trip types name the critical and the high limit, active trips neither") {
  using kiwi::thermal::TripLimit;
  CHECK(kiwi::thermal::trip_limit("critical\n") == TripLimit::critical);
  CHECK(kiwi::thermal::trip_limit("passive\n") == TripLimit::high);
  CHECK(kiwi::thermal::trip_limit("hot\n") == TripLimit::high);
  CHECK(kiwi::thermal::trip_limit("active\n") == TripLimit::none);
  CHECK(kiwi::thermal::trip_limit("") == TripLimit::none);
  CHECK(kiwi::thermal::parse_state("3\n") == 3.0);
  CHECK(kiwi::thermal::hwmon_limit(84.85) == 84.85);
  CHECK_FALSE(kiwi::thermal::hwmon_limit(127.0));  // it87's "no limit set"
  CHECK_FALSE(kiwi::thermal::hwmon_limit(-128.0));
  CHECK_FALSE(kiwi::thermal::hwmon_limit(std::nullopt));
  CHECK_FALSE(kiwi::thermal::parse_state("-1\n"));
  CHECK_FALSE(kiwi::thermal::parse_state("fast\n"));
}

TEST_CASE("thermal: each sensor's own limits beside its reading, and the cooling devices") {
  Harness h(fixture("rk3588"), defaults());
  kiwi::thermal::ThermalSensor sensor(h.context());
  CHECK(sensor.sample(h.sink).message.empty());
  // soc-thermal: passive trips at 75 and 85 °C (cooling starts at the first), critical at 115.
  CHECK(h.sink.value("thermal_high_celsius", {{"sensor", "soc-thermal"}}) == 75.0);
  CHECK(h.sink.value("thermal_critical_celsius", {{"sensor", "soc-thermal"}}) == 115.0);
  CHECK(h.sink.value("thermal_critical_celsius", {{"sensor", "npu-thermal"}}) == 115.0);
  CHECK_FALSE(h.sink.value("thermal_high_celsius", {{"sensor", "npu-thermal"}}));
  CHECK(h.sink.label_values("thermal_cooling_state", "device") ==
        std::vector<std::string>{"pwm-fan", "cpufreq-cpu0", "cpufreq-cpu4", "cpufreq-cpu6"});
  CHECK(h.sink.value("thermal_cooling_state", {{"device", "pwm-fan"}}) == 1.0);
  CHECK(h.sink.value("thermal_cooling_max_state", {{"device", "pwm-fan"}}) == 4.0);
  CHECK(h.sink.value("thermal_cooling_max_state", {{"device", "cpufreq-cpu4"}}) == 12.0);

  Harness pi(fixture("rpi4"), defaults());
  kiwi::thermal::ThermalSensor pi_sensor(pi.context());
  pi_sensor.sample(pi.sink);
  CHECK(pi.sink.value("thermal_critical_celsius", {{"sensor", "cpu-thermal"}}) == 110.0);
  CHECK(pi.sink.count("thermal_high_celsius") == 0);
  CHECK(pi.sink.count("thermal_cooling_state") == 0);

  Harness x86(fixture("x86"), defaults());
  kiwi::thermal::ThermalSensor x86_sensor(x86.context());
  x86_sensor.sample(x86.sink);
  CHECK(x86.sink.value("thermal_high_celsius", {{"sensor", "nvme_Composite"}}) == 81.85);
  CHECK_FALSE(x86.sink.value("thermal_high_celsius", {{"sensor", "it8613_temp1"}}));  // 127: unset
  CHECK(x86.sink.value("thermal_critical_celsius", {{"sensor", "nvme_Composite"}}) == 84.85);
  CHECK(x86.sink.value("thermal_critical_celsius", {{"sensor", "coretemp_Package id 0"}}) == 100.0);
  CHECK_FALSE(x86.sink.value("thermal_critical_celsius", {{"sensor", "coretemp_Core 0"}}));
}

TEST_CASE("thermal: a VM's cooling devices without states are not reported") {
  // tests/fixtures/vm: two ACPI "Processor" cooling devices with max_state 0.
  Harness h(fixture("vm"), defaults());
  kiwi::thermal::ThermalSensor sensor(h.context());
  CHECK(sensor.sample(h.sink).status == kiwi::SampleStatus::no_data);
  CHECK(h.sink.samples.empty());
}

TEST_CASE("thermal: a broken limit or cooling state is named and logged once, the rest arrives") {
  // tests/fixtures/awkward: cpu0-thermal's passive trip reads "ninety", its active trip (a fan
  // step) is no limit; the pwm-fan's cur_state reads "fast".
  Harness h(fixture("awkward"), defaults());
  kiwi::thermal::ThermalSensor sensor(h.context());
  const auto result = sensor.sample(h.sink);
  CHECK(result.status == kiwi::SampleStatus::ok);
  CHECK_THAT(result.message,
             Contains("thermal_zone0/trip_point_1_temp: not a value: 'ninety\\x0a'") &&
                 Contains("skipped cpu2-thermal") &&
                 Contains("pwm-fan (" + h.sysfs +
                          "/class/thermal/cooling_device0/cur_state: not a state: 'fast')"));
  CHECK(h.sink.value("thermal_critical_celsius", {{"sensor", "cpu0-thermal"}}) == 115.0);
  CHECK(h.sink.count("thermal_high_celsius") == 0);
  CHECK(h.sink.label_values("thermal_cooling_state", "device") ==
        std::vector<std::string>{"thermal-cpufreq-0"});
  CHECK(h.sink.value("thermal_cooling_state", {{"device", "thermal-cpufreq-0"}}) == 3.0);
  const auto warnings = h.log.count(kiwi::LogLevel::warn);
  CHECK(warnings == 3);  // the trip point, cpu2-thermal, the pwm-fan
  sensor.sample(h.sink);
  CHECK(h.log.count(kiwi::LogLevel::warn) == warnings);
}

TEST_CASE("thermal: cooling devices alone are data, and an error when all of them fail") {
  ScratchTree tree;
  tree.write("sys/class/thermal/cooling_device0/type", "pwm-fan\n");
  tree.write("sys/class/thermal/cooling_device0/max_state", "4\n");
  tree.write("sys/class/thermal/cooling_device0/cur_state", "2\n");
  Harness h(tree.root(), defaults());
  kiwi::thermal::ThermalSensor sensor(h.context());
  CHECK(sensor.sample(h.sink).status == kiwi::SampleStatus::ok);
  CHECK(h.sink.value("thermal_cooling_state", {{"device", "pwm-fan"}}) == 2.0);
  CHECK(h.sink.count("thermal_max_celsius") == 0);
  tree.make_unreadable("sys/class/thermal/cooling_device0/cur_state");
  CHECK_THROWS_WITH(sensor.sample(h.sink), Contains("all thermal sensors failed: pwm-fan ("));
}
