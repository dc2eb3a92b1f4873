// The network sensor: per-interface receive and transmit counters from /proc/net/dev (the agent
// derives their rates), link speed and utilisation from sysfs. See README.md for the metrics.
#pragma once

#include <array>
#include <cstdint>
#include <kiwi/glob.hpp>
#include <kiwi/io.hpp>
#include <kiwi/sensor.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "network_parse.hpp"

namespace kiwi::network {

// The one place the network options and their defaults are declared (plugin.cpp registers it; the
// host fills in defaults; tests build Options from it).
inline constexpr kiwi::OptionSpec kOptions[] = {
    {"include", kiwi::OptionType::string_list, R"(["*"])",
     "interface name globs to report (`*` matches any run of characters)"},
    // veth* by default: a container's end of its link comes and goes with the container, so on a
    // container host each start added 18 series to the history for good (and a few hundred of them
    // reach max_series_per_sensor); the bridges they hang on (docker0, br-*) carry their sum.
    // ifb*: the kernel's intermediate functional blocks (traffic shaping of ingress, as tc and
    // SQM set up) repeat the traffic of the interface they shape.
    {"exclude", kiwi::OptionType::string_list, R"(["lo", "veth*", "ifb*"])",
     "interface name globs not to report, even if included (e.g. \"docker*\")"},
};

// The metrics that are not rates of one column, declared once.
inline constexpr kiwi::MetricSpec kSpeed{
    "network_speed_bytes_per_second", kiwi::Unit::bytes_per_second, kiwi::MetricKind::gauge,
    "interface",
    "link speed in bytes per second (sysfs class/net/<if>/speed), where the driver knows it"};
inline constexpr kiwi::MetricSpec kUtilisation{
    "network_utilisation_ratio", kiwi::Unit::ratio, kiwi::MetricKind::gauge, "interface",
    "busier direction's rate as a share of the link speed"};

// Wi-Fi, from <procfs>/net/wireless (only the interfaces listed there).
inline constexpr kiwi::MetricSpec kWirelessQuality{
    "network_wireless_quality", kiwi::Unit::none, kiwi::MetricKind::gauge, "interface",
    "Wi-Fi link quality as the driver counts it (/proc/net/wireless; most drivers out of 70)"};
inline constexpr kiwi::MetricSpec kWirelessSignal{
    "network_wireless_signal_dbm", kiwi::Unit::none, kiwi::MetricKind::gauge, "interface",
    "Wi-Fi signal level in dBm (/proc/net/wireless level): -50 is strong, -80 weak"};
inline constexpr kiwi::MetricSpec kWirelessNoise{
    "network_wireless_noise_dbm", kiwi::Unit::none, kiwi::MetricKind::gauge, "interface",
    "Wi-Fi noise level in dBm (/proc/net/wireless noise), where the driver measures it"};

// Every metric the sensor may emit: each counter and its rate, then kSpeed and kUtilisation, then
// the Wi-Fi ones.
// plugin.cpp registers it (it is the HELP text of /metrics); the unit tests check every emitted
// metric against it.
inline constexpr auto kMetricSpecs = [] {
  std::array<kiwi::MetricSpec, 2 * std::size(kCounterColumns) + 5> all{};
  std::size_t n = 0;
  for (const auto& c : kCounterColumns) {
    all[n++] = c.counter;
    all[n++] = c.rate;
  }
  all[n++] = kSpeed;
  all[n++] = kUtilisation;
  all[n++] = kWirelessQuality;
  all[n++] = kWirelessSignal;
  all[n++] = kWirelessNoise;
  return all;
}();

class NetworkSensor final : public kiwi::Sensor {
 public:
  // Copies the roots and options; reads nothing, so a missing file shows up in the first sample.
  explicit NetworkSensor(const kiwi::SensorContext& ctx);

  kiwi::SampleResult sample(kiwi::MetricSink& sink) override;

 private:
  // What utilisation needs of the previous sample: the byte counters of the interfaces with a
  // known link speed. (The agent derives the rates themselves from the counters.)
  struct Reading {
    std::optional<std::int64_t> uptime_ms;  // nullopt: <procfs>/uptime could not be read
    std::map<std::string, std::pair<double, double>, std::less<>> bytes;  // receive, transmit
  };

  std::string procfs_;
  std::string sysfs_;
  kiwi::KeptFile dev_;       // <procfs>/net/dev
  kiwi::KeptFile uptime_;    // <procfs>/uptime
  kiwi::KeptFile wireless_;  // <procfs>/net/wireless
  // Each reported interface's link speed file, by interface name.
  std::map<std::string, kiwi::KeptFile, std::less<>> speed_;
  kiwi::NameFilter filter_;          // the include and exclude options
  std::optional<Reading> previous_;  // nullopt before the first sample
  std::string wireless_text_;        // <procfs>/net/wireless as last read (storage reused)
};

}  // namespace kiwi::network
