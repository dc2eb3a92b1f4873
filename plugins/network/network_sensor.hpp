// The network sensor: per-interface receive and transmit rates from /proc/net/dev, link speed and
// utilisation from sysfs. See README.md for the metrics.
#pragma once

#include <cstdint>
#include <kiwi/glob.hpp>
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
    {"exclude", kiwi::OptionType::string_list, R"(["lo"])",
     "interface name globs not to report, even if included (e.g. \"veth*\", \"docker*\")"},
};

// Every metric the sensor may emit: name, unit, counter, labels, help. plugin.cpp registers it
// (it is the HELP text of /metrics); the unit tests check every emitted metric against it.
inline constexpr kiwi::MetricSpec kMetricSpecs[] = {
    {"network_receive_bytes_per_second", "bytes_per_second", false, "interface",
     "bytes received per second since the last sample (/proc/net/dev)"},
    {"network_transmit_bytes_per_second", "bytes_per_second", false, "interface",
     "bytes sent per second since the last sample (/proc/net/dev)"},
    {"network_receive_packets_per_second", "per_second", false, "interface",
     "packets received per second (/proc/net/dev)"},
    {"network_transmit_packets_per_second", "per_second", false, "interface",
     "packets sent per second (/proc/net/dev)"},
    {"network_receive_errors_per_second", "per_second", false, "interface",
     "receive errors per second (/proc/net/dev errs)"},
    {"network_transmit_errors_per_second", "per_second", false, "interface",
     "transmit errors per second (/proc/net/dev errs)"},
    {"network_receive_drops_per_second", "per_second", false, "interface",
     "received packets dropped per second (/proc/net/dev drop)"},
    {"network_transmit_drops_per_second", "per_second", false, "interface",
     "packets dropped on send per second (/proc/net/dev drop)"},
    {"network_speed_bytes_per_second", "bytes_per_second", false, "interface",
     "link speed in bytes per second (sysfs class/net/<if>/speed), where the driver knows it"},
    {"network_utilisation_ratio", "ratio", false, "interface",
     "busier direction's rate as a share of the link speed"},
};

class NetworkSensor final : public kiwi::Sensor {
 public:
  // Copies the roots and options; reads nothing, so a missing file shows up in the first sample.
  explicit NetworkSensor(const kiwi::SensorContext& ctx);

  kiwi::SampleResult sample(kiwi::MetricSink& sink) override;

 private:
  struct Reading {
    std::int64_t uptime_ms = 0;
    std::map<std::string, Counters, std::less<>> interfaces;  // by name: order changes are harmless
  };

  std::string procfs_;
  std::string sysfs_;
  kiwi::NameFilter filter_;  // the include and exclude options
  kiwi::Logger& log_;
  std::optional<Reading> previous_;  // nullopt before the first sample
};

}  // namespace kiwi::network
