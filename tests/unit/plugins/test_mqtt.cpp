// The mqtt output's pure parts: the broker URL, topics, each series as a Home Assistant sensor,
// the discovery message byte for byte, and the board read from the fixture boards' sysfs.
#include <catch2/catch.hpp>

#include "mqtt.hpp"
#include "sensor_test_util.hpp"

using namespace kiwi_mqtt;
using kiwi::MetricKind;
using kiwi::Unit;

namespace {

kiwi::OutputSeries series(std::string name, Unit unit,
                          std::vector<std::pair<std::string, std::string>> labels = {},
                          MetricKind kind = MetricKind::gauge) {
  kiwi::OutputSeries s;
  s.name = std::move(name);
  s.unit = unit;
  s.labels = std::move(labels);
  s.kind = kind;
  return s;
}

}  // namespace

TEST_CASE("mqtt: a url is mqtt:// or mqtts:// with a host and an optional port") {
  auto b = parse_url("mqtt://broker.lan");
  CHECK(b.host == "broker.lan");
  CHECK(b.port == 1883);
  CHECK_FALSE(b.tls);
  b = parse_url("mqtts://broker.lan");
  CHECK(b.port == 8883);
  CHECK(b.tls);
  b = parse_url("mqtt://127.0.0.1:18830/");
  CHECK(b.host == "127.0.0.1");
  CHECK(b.port == 18830);
  b = parse_url("mqtt://[::1]:1884");
  CHECK(b.host == "::1");
  CHECK(b.port == 1884);
  CHECK_THROWS_WITH(parse_url("tcp://broker:1883"),
                    Catch::Contains("is not mqtt://host[:port] or mqtts://host[:port]"));
  CHECK_THROWS_WITH(parse_url("mqtt://user:pw@broker"), Catch::Contains("password_file apart"));
  CHECK_THROWS_WITH(parse_url("mqtt://broker:0"), Catch::Contains("not 1..65535"));
  CHECK_THROWS_WITH(parse_url("mqtt://broker:x"), Catch::Contains("not 1..65535"));
  CHECK_THROWS_WITH(parse_url("mqtt://:1883"), Catch::Contains("names no host"));
  CHECK_THROWS(parse_url(""));
}

TEST_CASE("mqtt: topic levels and object ids keep letters, digits, _ and - only") {
  CHECK(topic_id("kiwipi") == "kiwipi");
  CHECK(topic_id("my.pi") == "my_pi");
  CHECK(topic_id("barn pi #2/+") == "barn_pi_2");
  CHECK(topic_id("...") == "");
  CHECK(object_id(series("cpu_usage_ratio", Unit::ratio)) == "cpu_usage_ratio");
  CHECK(object_id(series("thermal_celsius", Unit::celsius, {{"sensor", "cpu-thermal"}})) ==
        "thermal_celsius_cpu-thermal");
  CHECK(object_id(series("storage_used_ratio", Unit::ratio, {{"mount", "/"}})) ==
        "storage_used_ratio_root");
  CHECK(object_id(series("storage_used_ratio", Unit::ratio, {{"mount", "/boot/firmware"}})) ==
        "storage_used_ratio_boot_firmware");
  CHECK(object_id(series("thermal_celsius", Unit::celsius, {{"sensor", "SoC Temp"}})) ==
        "thermal_celsius_soc_temp");
}

TEST_CASE("mqtt: each unit is Home Assistant's, ratios as percent, counters total_increasing") {
  auto e = entity_for(series("cpu_usage_ratio", Unit::ratio));
  CHECK(e.name == "CPU usage");
  CHECK(e.unit == "%");
  CHECK(e.device_class == "");
  CHECK(e.state_class == "measurement");
  CHECK(state_payload(e, 0.125) == "12.5");
  CHECK(state_payload(e, 1.0) == "100");
  CHECK(state_payload(e, 0.1234567891) == "12.345679");  // the API's 6 decimals
  CHECK(state_payload(e, std::nan("")) == std::nullopt);

  e = entity_for(series("thermal_celsius", Unit::celsius, {{"sensor", "cpu-thermal"}}));
  CHECK(e.name == "Temperature cpu-thermal");
  CHECK(e.unit == "°C");
  CHECK(e.device_class == "temperature");
  CHECK(state_payload(e, 47.75) == "47.75");

  e = entity_for(series("storage_used_ratio", Unit::ratio, {{"mount", "/"}}));
  CHECK(e.name == "Storage used /");

  const std::tuple<Unit, const char*, const char*> units[] = {
      {Unit::bytes, "B", "data_size"},
      {Unit::hertz, "Hz", "frequency"},
      {Unit::volts, "V", "voltage"},
      {Unit::amperes, "A", "current"},
      {Unit::watts, "W", "power"},
      {Unit::seconds, "s", "duration"},
      {Unit::bytes_per_second, "B/s", "data_rate"},
      {Unit::none, "", ""},
      {Unit::count, "", ""}};
  for (const auto& [unit, symbol, device_class] : units) {
    INFO(kiwi::to_string(unit));
    e = entity_for(series("x_value", unit));
    CHECK(e.unit == symbol);
    CHECK(e.device_class == device_class);
    CHECK(state_payload(e, 1500) == "1500");
  }
  e = entity_for(series("diskio_written_bytes_total", Unit::bytes, {{"device", "mmcblk0"}},
                        MetricKind::counter));
  CHECK(e.state_class == "total_increasing");
  CHECK(e.name == "Diskio written mmcblk0");
  CHECK(entity_for(series("cpu_frequency_hertz", Unit::hertz, {{"core", "0"}})).name ==
        "CPU frequency 0");
}

TEST_CASE("mqtt: a reading older than a minute is not published as current") {
  CHECK(is_current(1'000'000, 1'000'000));
  CHECK(is_current(1'000'000, 1'060'000));
  CHECK_FALSE(is_current(1'000'000, 1'060'001));
}

TEST_CASE("mqtt: topics under the discovery prefix and the topic prefix") {
  Topics t;
  t.node = "kiwipi";
  CHECK(t.config("cpu_usage_ratio") == "homeassistant/sensor/kiwipi/cpu_usage_ratio/config");
  CHECK(t.state("cpu_usage_ratio") == "kiwi/kiwipi/cpu_usage_ratio/state");
  CHECK(t.availability() == "kiwi/kiwipi/availability");
  CHECK(t.ha_status() == "homeassistant/status");
  t.discovery_prefix = "ha";
  t.topic_prefix = "boards/kiwi";
  CHECK(t.config("x") == "ha/sensor/kiwipi/x/config");
  CHECK(t.state("x") == "boards/kiwi/kiwipi/x/state");
}

TEST_CASE("mqtt: the discovery message, byte for byte") {
  Topics t;
  t.node = "kiwipi";
  Device d{"kiwipi", "kiwipi", {"Raspberry Pi 4 Model B Rev 1.4", "Raspberry Pi Ltd"}, "0.3.0"};
  const auto e = entity_for(series("thermal_celsius", Unit::celsius, {{"sensor", "cpu-thermal"}}));
  CHECK(
      discovery_json(e, d, t) ==
      R"({"name":"Temperature cpu-thermal","unique_id":"kiwi_kiwipi_thermal_celsius_cpu-thermal",)"
      R"("object_id":"kiwipi_thermal_celsius_cpu-thermal",)"
      R"("state_topic":"kiwi/kiwipi/thermal_celsius_cpu-thermal/state",)"
      R"("availability_topic":"kiwi/kiwipi/availability","unit_of_measurement":"°C",)"
      R"("device_class":"temperature","state_class":"measurement",)"
      R"("suggested_display_precision":1,"device":{"identifiers":["kiwi_kiwipi"],)"
      R"("name":"kiwipi","model":"Raspberry Pi 4 Model B Rev 1.4",)"
      R"("manufacturer":"Raspberry Pi Ltd","sw_version":"0.3.0"}})");
  // No unit, no device class, no model: the members are left out, not sent empty.
  d.board = {};
  d.name = "barn \"pi\"";
  const auto alarm = entity_for(series("power_under_voltage_alarm", Unit::none));
  CHECK(discovery_json(alarm, d, t) ==
        R"({"name":"Under-voltage","unique_id":"kiwi_kiwipi_power_under_voltage_alarm",)"
        R"("object_id":"kiwipi_power_under_voltage_alarm",)"
        R"("state_topic":"kiwi/kiwipi/power_under_voltage_alarm/state",)"
        R"("availability_topic":"kiwi/kiwipi/availability","state_class":"measurement",)"
        R"("device":{"identifiers":["kiwi_kiwipi"],"name":"barn \"pi\"","sw_version":"0.3.0"}})");
}

TEST_CASE("mqtt: the board's model and maker from the fixture boards' device tree or DMI") {
  using kiwi_sensor_test::fixture;
  auto b = read_board(fixture("rpi4/sys"));
  CHECK(b.model == "Raspberry Pi 4 Model B Rev 1.4");
  CHECK(b.manufacturer == "Raspberry Pi Ltd");
  b = read_board(fixture("rpi5/sys"));
  CHECK(b.model == "Raspberry Pi 5 Model B Rev 1.0");
  CHECK(b.manufacturer == "Raspberry Pi Ltd");
  b = read_board(fixture("rk3588/sys"));
  CHECK(b.model == "Radxa ROCK 5B");
  CHECK(b.manufacturer == "Radxa");
  b = read_board(fixture("x86/sys"));  // sys_vendor is the "Default string" placeholder
  CHECK(b.model == "N100 Mini PC");
  CHECK(b.manufacturer == "");
  b = read_board(fixture("vm/sys"));  // neither: nothing said
  CHECK(b.model == "");
  CHECK(b.manufacturer == "");
  // A vendor prefix this table does not know: the model alone.
  b = board_from(std::string("Acme Board\0", 11), std::string("acme,board\0", 11), {}, {});
  CHECK(b.model == "Acme Board");
  CHECK(b.manufacturer == "");
  b = board_from({}, {}, std::string("NUC8i5BEH\n"), std::string("Intel Corporation\n"));
  CHECK(b.model == "NUC8i5BEH");
  CHECK(b.manufacturer == "Intel Corporation");
  b = board_from({}, {}, std::string("To Be Filled By O.E.M.\n"),
                 std::string("System manufacturer"));
  CHECK(b.model == "");
  CHECK(b.manufacturer == "");
}
