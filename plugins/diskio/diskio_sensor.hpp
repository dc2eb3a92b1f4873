// The diskio sensor: per block device read/write throughput, IOPS and busy ratio from
// /proc/diskstats. See README.md for the metrics and which devices are left out.
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

#include "diskio_parse.hpp"

namespace kiwi::diskio {

// The one place the diskio options and their defaults are declared (plugin.cpp registers it; the
// host fills in defaults; tests build Options from it).
inline constexpr kiwi::OptionSpec kOptions[] = {
    {"include", kiwi::OptionType::string_list, R"(["*"])",
     "device name globs to report (`*` matches any run of characters)"},
    {"exclude", kiwi::OptionType::string_list, R"(["loop*", "ram*", "zram*", "mmcblk*boot*"])",
     "device name globs not to report, even if included (e.g. add \"dm-*\" to hide LVM volumes)"},
    {"partitions", kiwi::OptionType::boolean, "false",
     "also report partitions (by default only whole devices, those listed in <sysfs>/block)"},
};

// Every metric the sensor may emit: the rate rows. plugin.cpp registers it (it is the HELP text of
// /metrics); the unit tests check every emitted metric against it.
inline constexpr auto kMetricSpecs = [] {
  std::array<kiwi::MetricSpec, 2 * std::size(kCounterColumns)> all{};
  std::size_t n = 0;
  for (const auto& c : kCounterColumns) {
    all[n++] = c.counter;
    all[n++] = c.rate;
  }
  return all;
}();

class DiskioSensor final : public kiwi::Sensor {
 public:
  // Copies the roots and options; reads nothing, so a missing file shows up in the first sample.
  explicit DiskioSensor(const kiwi::SensorContext& ctx);

  kiwi::SampleResult sample(kiwi::MetricSink& sink) override;

 private:
  std::string procfs_;
  std::string sysfs_;
  kiwi::KeptFile diskstats_;  // <procfs>/diskstats
  kiwi::NameFilter filter_;   // the include and exclude options
  bool partitions_;
  // Which devices of the last diskstats are reported, looked up in <sysfs>/block again only when
  // its list of names changes (a stat per device per sample otherwise).
  std::vector<std::string> names_;
  std::vector<char> reported_;
  std::string note_;
};

}  // namespace kiwi::diskio
