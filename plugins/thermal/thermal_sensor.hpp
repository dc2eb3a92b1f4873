// The thermal sensor: every thermal zone and hwmon temperature under the sysfs root, plus their
// maximum. See README.md for the metrics and naming rules.
#pragma once

#include <chrono>
#include <kiwi/attributes.hpp>
#include <kiwi/glob.hpp>
#include <kiwi/io.hpp>
#include <kiwi/sensor.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kiwi::thermal {

// The one place the thermal options and their defaults are declared (plugin.cpp registers it; the
// host fills in defaults; tests build Options from it).
inline constexpr kiwi::OptionSpec kOptions[] = {
    {"exclude", kiwi::OptionType::string_list, "[]",
     "sensor names (as in the sensor label, e.g. \"npu-thermal\", or globs: \"nvme*\") not to "
     "report"},
};

// Every metric the sensor may emit, each declared once: the sensor emits through these rows, and
// kMetricSpecs (plugin.cpp registers it) is the HELP text of /metrics and the README table.
inline constexpr kiwi::MetricSpec kCelsius{
    "thermal_celsius", kiwi::Unit::celsius, kiwi::MetricKind::gauge, "sensor",
    "temperature of one thermal zone or hwmon sensor (sysfs)"};
inline constexpr kiwi::MetricSpec kMaxCelsius{"thermal_max_celsius", kiwi::Unit::celsius,
                                              kiwi::MetricKind::gauge, "",
                                              "the hottest of the reported temperatures"};
inline constexpr kiwi::MetricSpec kCriticalCelsius{
    "thermal_critical_celsius", kiwi::Unit::celsius, kiwi::MetricKind::gauge, "sensor",
    "the sensor's own critical limit: a thermal zone's lowest critical trip point (the kernel "
    "shuts down there), an hwmon input's tempN_crit"};
inline constexpr kiwi::MetricSpec kHighCelsius{
    "thermal_high_celsius", kiwi::Unit::celsius, kiwi::MetricKind::gauge, "sensor",
    "the sensor's own high limit: a thermal zone's lowest passive or hot trip point (cooling by "
    "slowing down starts there), an hwmon input's tempN_max"};
inline constexpr kiwi::MetricSpec kCoolingState{
    "thermal_cooling_state", kiwi::Unit::none, kiwi::MetricKind::gauge, "device",
    "a cooling device's current state: 0 is no cooling, max_state the most (a fan's speed step, "
    "a CPU's frequency step down)"};
inline constexpr kiwi::MetricSpec kCoolingMaxState{
    "thermal_cooling_max_state", kiwi::Unit::none, kiwi::MetricKind::gauge, "device",
    "a cooling device's highest state (<sysfs>/class/thermal/cooling_deviceN/max_state)"};
inline constexpr kiwi::MetricSpec kMetricSpecs[] = {kCelsius,     kMaxCelsius,   kCriticalCelsius,
                                                    kHighCelsius, kCoolingState, kCoolingMaxState};

class ThermalSensor final : public kiwi::Sensor {
 public:
  // Copies the sysfs root and options; reads nothing. Sensors are discovered at the first sample
  // and again every kRediscoverEvery (so a USB or NVMe device plugged in later shows up), or at
  // the next sample when one of them went away.
  explicit ThermalSensor(const kiwi::SensorContext& ctx);

  kiwi::SampleResult sample(kiwi::MetricSink& sink) override;

  // Listing the zones and chips reads a few files per sensor: not worth doing every second.
  static constexpr std::chrono::seconds kRediscoverEvery{10};

 private:
  struct Source {
    std::string name;                      // unique sensor label
    kiwi::KeptFile temp;                   // millidegree file
    std::optional<double> critical, high;  // its limits, read at discovery
  };
  struct Cooling {
    std::string name;          // unique device label: its type
    kiwi::KeptFile cur_state;  // read each sample
    double max_state = 0;      // read at discovery
  };
  // Lists the sensors and cooling devices into sources_ and cooling_, reading their limits;
  // problems with the limit files go to discovery_note_.
  void discover();
  void read_zone_trips(const std::string& zone_dir, Source& source);

  std::string sysfs_;
  kiwi::NameFilter filter_;  // everything but the exclude option
  kiwi::Logger& log_;
  std::set<std::string> failing_;  // sensors that failed last time, to log changes only once
  std::vector<Source> sources_;    // as discovered at discovered_at_
  std::vector<Cooling> cooling_;   // cooling devices with at least one state, as discovered
  kiwi::AttributeReads reads_;     // the limit files' problems, at discovery
  std::string discovery_note_;     // those problems, named in each sample until the next one
  std::optional<std::chrono::steady_clock::time_point> discovered_at_;
};

}  // namespace kiwi::thermal
