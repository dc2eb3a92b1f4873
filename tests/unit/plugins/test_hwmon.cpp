// hwmon plugin: attribute names and values as the kernel writes them, and the sensor on fixture
// boards: an x86 mini PC's it8613 Super I/O chip, an RK3588's PWM fan, two INA231 power monitors
// with a broken file each (awkward), boards without any, and files that go away or break.
#include <catch2/catch.hpp>
#include <charconv>
#include <filesystem>

#include "hwmon_parse.hpp"
#include "hwmon_sensor.hpp"
#include "sensor_test_util.hpp"

using Catch::Matchers::Contains;
using kiwi_sensor_test::fixture;
using kiwi_sensor_test::Harness;
using kiwi_sensor_test::ScratchTree;
using namespace kiwi::hwmon;

namespace {

std::vector<kiwi::OptionValue> defaults() {
  return kiwi_sensor_test::default_values(kOptions);
}

using Labels = std::map<std::string, std::string>;
Labels at(const std::string& chip, const std::string& sensor) {
  return {{"chip", chip}, {"sensor", sensor}};
}
Labels alarm(const std::string& chip, const std::string& sensor, const std::string& which) {
  return {{"alarm", which}, {"chip", chip}, {"sensor", sensor}};
}

}  // namespace

TEST_CASE("hwmon: attribute names are taken apart as the ABI names them") {
  auto parsed = [](std::string_view name) -> std::string {
    const auto a = parse_attribute(name);
    if (!a) return "-";
    return std::string(kind_name(a->kind)) + " " + std::to_string(a->channel) + " '" +
           std::string(a->item) + "'";
  };
  CHECK(parsed("fan2_input") == "fan 2 'input'");
  CHECK(parsed("fan10_min_alarm") == "fan 10 'min_alarm'");
  CHECK(parsed("in0_lcrit_alarm") == "in 0 'lcrit_alarm'");
  CHECK(parsed("pwm1") == "pwm 1 ''");
  CHECK(parsed("pwm1_auto_point2_pwm") == "pwm 1 'auto_point2_pwm'");
  CHECK(parsed("curr3_input") == "curr 3 'input'");
  CHECK(parsed("power1_average") == "power 1 'average'");
  // Other kinds, attributes of no channel, and names that only look like one.
  for (const char* other : {"temp1_input", "intrusion0_alarm", "in_reset_history", "name", "alarms",
                            "pwmfan", "fan", "fan1_", "fan01_input", "fan1x_input",
                            "fan99999999999_input", "energy1_input", "humidity1_input", ""}) {
    INFO(other);
    CHECK(parsed(other) == "-");
  }
}

TEST_CASE("hwmon: an alarm is named by its kind and limit, and other items are no alarm") {
  CHECK(alarm_name(Kind::fan, "alarm") == "fan");
  CHECK(alarm_name(Kind::fan, "min_alarm") == "fan_min");
  CHECK(alarm_name(Kind::in, "lcrit_alarm") == "in_lcrit");
  CHECK(alarm_name(Kind::curr, "max_alarm") == "curr_max");
  CHECK(alarm_name(Kind::power, "cap_alarm") == "power_cap");
  for (const char* item : {"input", "min", "beep", "enable", "_alarm", "alarms", ""}) {
    INFO(item);
    CHECK_FALSE(alarm_name(Kind::in, item));
  }
}

TEST_CASE("hwmon: values in base units, and text that is not one refused") {
  CHECK(parse_value(Format::milli, "3344\n") == 3.344);
  CHECK(parse_value(Format::milli, "-1250\n") == -1.25);  // a current flowing back (ina2xx)
  CHECK(parse_value(Format::micro, "995000\n") == 0.995);
  CHECK(parse_value(Format::micro, "4120000") == 4.12);
  CHECK(parse_value(Format::rpm, "1785\n") == 1785);
  CHECK(parse_value(Format::rpm, "0\n") == 0);
  CHECK(parse_value(Format::pwm, "102\n") == 0.4);
  CHECK(parse_value(Format::pwm, "255\n") == 1.0);
  CHECK(parse_value(Format::pwm, "0\n") == 0.0);
  CHECK(parse_value(Format::flag, "1\n") == 1);
  CHECK(parse_value(Format::flag, "0") == 0);
  CHECK_FALSE(parse_value(Format::rpm, "-1\n"));  // it87: no reading from the tachometer
  CHECK_FALSE(parse_value(Format::pwm, "256\n"));
  CHECK_FALSE(parse_value(Format::pwm, "-1\n"));
  CHECK_FALSE(parse_value(Format::flag, "2\n"));
  for (const char* bad : {"", "\n", "0x0194\n", "1.2\n", "N/A\n", "12 V"}) {
    INFO(bad);
    for (auto f : {Format::milli, Format::micro, Format::rpm, Format::pwm, Format::flag})
      CHECK_FALSE(parse_value(f, bad));
  }
  CHECK(format_expected(Format::flag) == "not 0 or 1");
}

TEST_CASE("hwmon: every millivolt reading converts to exactly the decimal the kernel meant") {
  // What a user sees is the shortest text of the double: 3.344 V, never 3.3440000000000003.
  std::vector<std::string> wrong;
  for (int milli = -20000; milli <= 20000; ++milli) {
    const auto volts = parse_value(Format::milli, std::to_string(milli) + "\n");
    char buf[32];
    const std::string shortest =
        volts ? std::string(buf, std::to_chars(buf, buf + sizeof buf, *volts).ptr) : "none";
    char expected[32];
    std::snprintf(expected, sizeof expected, "%.3f", milli / 1000.0);
    std::string e = expected;
    while (e.back() == '0') e.pop_back();
    if (e.back() == '.') e.pop_back();
    if (e == "-0") e = "0";
    if (shortest != e && wrong.size() < 5) wrong.push_back(e + " read as " + shortest);
  }
  CHECK(wrong.empty());
}

TEST_CASE("hwmon: an x86 mini PC's it8613: fans, duty cycles, labelled voltages and alarms") {
  Harness h(fixture("x86"), defaults());
  HwmonSensor sensor(h.context());
  const auto r = h.sample(sensor);
  CHECK(r.status == kiwi::SampleStatus::ok);
  CHECK(r.message.empty());
  // The chip has no fan1 or pwm1, in3 or in6, and this board no fan4 (its pins serve other ends);
  // in7..in9 are internal and labelled by the driver. Nothing of the NVMe, coretemp or Wi-Fi chips
  // (temperatures).
  CHECK(h.sink.label_values("hwmon_volts", "sensor") ==
        std::vector<std::string>{"in0", "in1", "in2", "in4", "in5", "3VSB", "Vbat", "+3.3V"});
  CHECK(h.sink.label_values("hwmon_volts", "chip") == std::vector<std::string>(8, "it8613"));
  CHECK(h.sink.value("hwmon_volts", at("it8613", "in0")) == 0.77);
  CHECK(h.sink.value("hwmon_volts", at("it8613", "3VSB")) == 2.244);
  CHECK(h.sink.value("hwmon_volts", at("it8613", "+3.3V")) == 3.256);
  CHECK(h.sink.value("hwmon_volts", at("it8613", "Vbat")) == 3.146);
  CHECK(h.sink.find("hwmon_volts", at("it8613", "Vbat"))->unit == "volts");
  CHECK(h.sink.label_values("hwmon_fan_rpm", "sensor") ==
        std::vector<std::string>{"fan2", "fan3", "fan5"});
  CHECK(h.sink.value("hwmon_fan_rpm", at("it8613", "fan2")) == 1178);
  CHECK(h.sink.value("hwmon_fan_rpm", at("it8613", "fan3")) == 1642);
  CHECK(h.sink.value("hwmon_fan_rpm", at("it8613", "fan5")) == 0);  // nothing on that header
  CHECK(h.sink.find("hwmon_fan_rpm", at("it8613", "fan2"))->unit == "rpm");
  CHECK(h.sink.value("hwmon_fan_min_rpm", at("it8613", "fan2")) == 0);
  CHECK(h.sink.value("hwmon_pwm_ratio", at("it8613", "pwm2")) == 0.4);
  CHECK(h.sink.value("hwmon_pwm_ratio", at("it8613", "pwm3")) == 0.6);
  CHECK(h.sink.value("hwmon_pwm_ratio", at("it8613", "pwm5")) == 0);
  // One alarm per fan and per voltage with limits (in0..in7; in8 and in9 have only an input),
  // none for the chassis switch (intrusion0_alarm) or the temperatures.
  CHECK(h.sink.count("hwmon_alarm") == 3 + 6);
  CHECK(h.sink.value("hwmon_alarm", alarm("it8613", "fan2", "fan")) == 0);
  CHECK(h.sink.value("hwmon_alarm", alarm("it8613", "3VSB", "in")) == 0);
  CHECK_FALSE(h.sink.find("hwmon_alarm", alarm("it8613", "Vbat", "in")));
  CHECK(h.sink.samples.size() == 8 + 3 + 3 + 3 + 9);
  CHECK(h.log.lines.empty());
}

TEST_CASE("hwmon: an RK3588's PWM fan without a tachometer, and not the zones' mirror chips") {
  Harness h(fixture("rk3588"), defaults());
  HwmonSensor sensor(h.context());
  CHECK(h.sample(sensor).status == kiwi::SampleStatus::ok);
  REQUIRE(h.sink.samples.size() == 1);
  CHECK(h.sink.value("hwmon_pwm_ratio", at("pwmfan", "pwm1")) == 72 / 255.0);
}

TEST_CASE("hwmon: a Pi 5's Active Cooler with its tachometer, and RP1's four ADC inputs") {
  Harness h(fixture("rpi5"), defaults());
  HwmonSensor sensor(h.context());
  CHECK(h.sample(sensor).status == kiwi::SampleStatus::ok);
  CHECK(h.sink.value("hwmon_fan_rpm", at("pwmfan", "fan1")) == 2727.0);
  CHECK(h.sink.value("hwmon_pwm_ratio", at("pwmfan", "pwm1")) == 75 / 255.0);  // fan state 1
  CHECK(h.sink.count("hwmon_fan_min_rpm") == 0);  // pwm-fan has no fan1_min
  CHECK(h.sink.label_values("hwmon_volts", "sensor") ==
        std::vector<std::string>{"in1", "in2", "in3", "in4"});
  CHECK(h.sink.value("hwmon_volts", at("rp1_adc", "in4")) == 1.479);
  CHECK(h.sink.count("hwmon_alarm") == 0);  // rpi_volt's alarm is the power sensor's
}

TEST_CASE("hwmon: a Pi 4 (rpi_volt only: the power sensor's) and a VM have no data") {
  for (const char* board : {"rpi4", "vm"}) {
    INFO(board);
    Harness h(fixture(board), defaults());
    HwmonSensor sensor(h.context());
    const auto r = h.sample(sensor);
    CHECK(r.status == kiwi::SampleStatus::no_data);
    CHECK_THAT(r.message, Contains("no hwmon fan, PWM, voltage, current or power channels under " +
                                   h.sysfs + "/class/hwmon") &&
                              Contains("rpi_volt's alarm the power sensor's"));
    CHECK(h.sink.samples.empty());
    CHECK(h.log.lines.empty());
  }
}

TEST_CASE("hwmon: two INA231s, one with a garbled current and an unreadable power, and the rest") {
  // tests/fixtures/awkward: the second ina231 (ina231_2) has curr1_input "0x0194" and a
  // power1_input that fails to read. Both are named and logged once; everything else arrives.
  Harness h(fixture("awkward"), defaults());
  HwmonSensor sensor(h.context());
  const auto r = h.sample(sensor);
  CHECK(r.status == kiwi::SampleStatus::ok);
  CHECK_THAT(r.message, Contains("hwmon1/curr1_input: not a whole number: '0x0194\\x0a'") &&
                            Contains("hwmon1/power1_input"));
  CHECK(h.sink.value("hwmon_volts", at("ina231", "in1")) == 1.225);
  CHECK(h.sink.value("hwmon_amperes", at("ina231", "curr1")) == 0.812);
  CHECK(h.sink.find("hwmon_amperes", at("ina231", "curr1"))->unit == "amperes");
  CHECK(h.sink.value("hwmon_watts", at("ina231", "power1")) == 0.995);
  CHECK(h.sink.find("hwmon_watts", at("ina231", "power1"))->unit == "watts");
  CHECK(h.sink.value("hwmon_alarm", alarm("ina231", "in1", "in_lcrit")) == 0);
  CHECK(h.sink.value("hwmon_alarm", alarm("ina231", "power1", "power_crit")) == 0);
  CHECK(h.sink.value("hwmon_volts", at("ina231_2", "in1")) == 1.037);
  CHECK_FALSE(h.sink.find("hwmon_amperes", at("ina231_2", "curr1")));
  CHECK_FALSE(h.sink.find("hwmon_watts", at("ina231_2", "power1")));
  CHECK(h.sink.value("hwmon_alarm", alarm("ina231_2", "power1", "power_crit")) == 0);
  CHECK(h.sink.value("hwmon_pwm_ratio", at("pwmfan", "pwm1")) == 130 / 255.0);
  CHECK(h.sink.count("hwmon_fan_rpm") == 0);  // the XU4's fan has no tachometer
  CHECK(h.log.count(kiwi::LogLevel::warn) == 1);
  h.sample(sensor);  // the same failures: not logged again
  CHECK(h.log.count(kiwi::LogLevel::warn) == 1);
}

TEST_CASE("hwmon: a duty cycle, speed or alarm out of its range is named, not reported") {
  ScratchTree tree("x86");
  const std::string chip = "sys/class/hwmon/hwmon5/";
  tree.write(chip + "pwm2", "256\n");
  tree.write(chip + "fan2_input", "-1\n");
  tree.write(chip + "fan5_alarm", "2\n");
  Harness h(tree.root(), defaults());
  HwmonSensor sensor(h.context());
  const auto r = h.sample(sensor);
  CHECK_THAT(r.message, Contains("hwmon5/pwm2: not a duty cycle (0 to 255): '256\\x0a'") &&
                            Contains("hwmon5/fan2_input: not a fan speed (rpm, 0 or more): '-1") &&
                            Contains("hwmon5/fan5_alarm: not 0 or 1: '2\\x0a'"));
  CHECK_FALSE(h.sink.find("hwmon_pwm_ratio", at("it8613", "pwm2")));
  CHECK_FALSE(h.sink.find("hwmon_fan_rpm", at("it8613", "fan2")));
  CHECK_FALSE(h.sink.find("hwmon_alarm", alarm("it8613", "fan5", "fan")));
  CHECK(h.sink.value("hwmon_fan_min_rpm", at("it8613", "fan2")) == 0);
}

TEST_CASE("hwmon: when every channel fails to read the sample is an error naming each") {
  ScratchTree tree("rk3588");
  tree.make_unreadable("sys/class/hwmon/hwmon7/pwm1");
  Harness h(tree.root(), defaults());
  HwmonSensor sensor(h.context());
  CHECK_THROWS_WITH(h.sample(sensor), Contains("hwmon7/pwm1"));
}

TEST_CASE("hwmon: a read that fails with EIO is named with the error") {
  // /proc/self/mem read at offset 0 fails with EIO, exactly as a chip on a flaky I2C bus does.
  ScratchTree tree("x86");
  tree.remove("sys/class/hwmon/hwmon5/in0_input");
  std::filesystem::create_symlink("/proc/self/mem",
                                  tree.root() + "/sys/class/hwmon/hwmon5/in0_input");
  Harness h(tree.root(), defaults());
  HwmonSensor sensor(h.context());
  const auto r = h.sample(sensor);
  CHECK(r.status == kiwi::SampleStatus::ok);
  CHECK_THAT(r.message, Contains("hwmon5/in0_input") && Contains("Input/output error"));
  CHECK(h.sink.count("hwmon_volts") == 7);
}

TEST_CASE("hwmon: a chip that only averages power is read from powerN_average") {
  ScratchTree tree;
  tree.write("sys/class/hwmon/hwmon0/name", "power_meter\n");  // ACPI's power meter
  tree.write("sys/class/hwmon/hwmon0/power1_average", "12500000\n");
  tree.write("sys/class/hwmon/hwmon0/power1_average_interval", "1000\n");
  tree.write("sys/class/hwmon/hwmon1/name", "amdgpu\n");  // both: the input wins
  tree.write("sys/class/hwmon/hwmon1/power1_average", "9000000\n");
  tree.write("sys/class/hwmon/hwmon1/power1_input", "11000000\n");
  Harness h(tree.root(), defaults());
  HwmonSensor sensor(h.context());
  CHECK(h.sample(sensor).status == kiwi::SampleStatus::ok);
  CHECK(h.sink.value("hwmon_watts", at("power_meter", "power1")) == 12.5);
  CHECK(h.sink.value("hwmon_watts", at("amdgpu", "power1")) == 11.0);
  CHECK(h.sink.count("hwmon_watts") == 2);
}

TEST_CASE(
    "hwmon: labels name channels, unique per kind, and empty or unreadable labels fall back") {
  ScratchTree tree;
  const std::string chip = "sys/class/hwmon/hwmon0/";
  tree.write(chip + "name", "nct6798\n");
  tree.write(chip + "fan1_input", "1200\n");
  tree.write(chip + "fan1_label", "CPU\n");
  tree.write(chip + "fan2_input", "900\n");
  tree.write(chip + "fan2_label", "CPU\n");
  tree.write(chip + "fan3_input", "0\n");
  tree.write(chip + "fan3_label", "\n");
  tree.write(chip + "in1_input", "1100\n");
  tree.write(chip + "in1_label", "CPU\n");
  tree.write(chip + "in2_input", "3300\n");
  tree.make_unreadable(chip + "in2_label");
  Harness h(tree.root(), defaults());
  HwmonSensor sensor(h.context());
  const auto r = h.sample(sensor);
  CHECK(h.sink.label_values("hwmon_fan_rpm", "sensor") ==
        std::vector<std::string>{"CPU", "CPU_2", "fan3"});
  CHECK(h.sink.value("hwmon_fan_rpm", at("nct6798", "CPU_2")) == 900);
  CHECK(h.sink.value("hwmon_volts", at("nct6798", "CPU")) == 1.1);  // another kind: its own name
  CHECK(h.sink.value("hwmon_volts", at("nct6798", "in2")) == 3.3);
  CHECK_THAT(r.message, Contains("hwmon0/in2_label") && Contains("(named in2)"));
}

TEST_CASE("hwmon: two chips of one name follow their device, not this boot's hwmon numbers") {
  // Two USB fan controllers: on this boot the one on port 2 was probed first (hwmon0). The _2
  // stays with the controller on port 2, as the thermal sensor's names do (kiwi/sysfs.hpp).
  ScratchTree tree;
  for (const char* n : {"0", "1"}) {
    const std::string chip = std::string("sys/class/hwmon/hwmon") + n + "/";
    tree.write(chip + "name", "corsaircpro\n");
    tree.write(chip + "fan1_input", n == std::string("0") ? "2000\n" : "1000\n");
  }
  const std::string usb = tree.root() + "/sys/devices/pci0000:00/0000:00:14.0/usb1";
  std::filesystem::create_directories(usb + "/1-1");
  std::filesystem::create_directories(usb + "/1-2");
  std::filesystem::create_directory_symlink("../../../devices/pci0000:00/0000:00:14.0/usb1/1-2",
                                            tree.root() + "/sys/class/hwmon/hwmon0/device");
  std::filesystem::create_directory_symlink("../../../devices/pci0000:00/0000:00:14.0/usb1/1-1",
                                            tree.root() + "/sys/class/hwmon/hwmon1/device");
  Harness h(tree.root(), defaults());
  HwmonSensor sensor(h.context());
  h.sample(sensor);
  CHECK(h.sink.value("hwmon_fan_rpm", at("corsaircpro", "fan1")) == 1000);    // port 1
  CHECK(h.sink.value("hwmon_fan_rpm", at("corsaircpro_2", "fan1")) == 2000);  // port 2
}

TEST_CASE("hwmon: exclude leaves out channels by chip/sensor, with globs") {
  Harness h(fixture("x86"),
            kiwi_sensor_test::with_strings(defaults(), "exclude", {"it8613/in4", "*/fan3"}));
  HwmonSensor sensor(h.context());
  CHECK(h.sample(sensor).status == kiwi::SampleStatus::ok);
  CHECK(h.sink.count("hwmon_volts") == 7);
  CHECK_FALSE(h.sink.find("hwmon_volts", at("it8613", "in4")));
  CHECK_FALSE(h.sink.find("hwmon_alarm", alarm("it8613", "in4", "in")));  // its alarm too
  CHECK(h.sink.label_values("hwmon_fan_rpm", "sensor") == std::vector<std::string>{"fan2", "fan5"});
  CHECK(h.sink.count("hwmon_pwm_ratio") == 3);

  Harness all(fixture("x86"), kiwi_sensor_test::with_strings(defaults(), "exclude", {"it8613/*"}));
  HwmonSensor none(all.context());
  const auto r = all.sample(none);
  CHECK(r.status == kiwi::SampleStatus::no_data);
  CHECK(r.message == "every hwmon channel is in the exclude option");
}

TEST_CASE("hwmon: a channel that went away is dropped, and the chips are listed anew next sample") {
  // Between listings (every 10 s) only the value files are read; one gone (a USB fan controller
  // unplugged) makes the next sample list the chips again, which also finds one plugged in.
  ScratchTree tree("rk3588");
  Harness h(tree.root(), defaults());
  HwmonSensor sensor(h.context());
  h.sample(sensor);
  CHECK(h.sink.samples.size() == 1);
  tree.write("sys/class/hwmon/hwmon8/name", "corsaircpro\n");
  tree.write("sys/class/hwmon/hwmon8/fan1_input", "1500\n");
  h.sink.clear();
  h.sample(sensor);
  CHECK(h.sink.samples.size() == 1);  // not listed again yet
  tree.remove("sys/class/hwmon/hwmon7");
  h.sink.clear();
  const auto gone = h.sample(sensor);  // the fan's file is gone: no reading, a listing is due
  CHECK(gone.status == kiwi::SampleStatus::no_data);
  h.sink.clear();
  const auto r = h.sample(sensor);
  CHECK(r.status == kiwi::SampleStatus::ok);
  CHECK(r.message.empty());
  CHECK(h.sink.samples.size() == 1);
  CHECK(h.sink.value("hwmon_fan_rpm", at("corsaircpro", "fan1")) == 1500);
}
