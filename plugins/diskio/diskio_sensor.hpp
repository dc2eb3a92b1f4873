// The diskio sensor: per block device read/write throughput, IOPS and busy ratio from
// /proc/diskstats, and an eMMC's wear beside them. See README.md for the metrics and which devices
// are left out.
#pragma once

#include <array>
#include <cstdint>
#include <kiwi/attributes.hpp>
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
    {"wear", kiwi::OptionType::boolean, "true",
     "also report the wear an eMMC estimates for itself (<sysfs>/block/mmcblkN/device/life_time "
     "and pre_eol_info)"},
};

// An eMMC's wear, labelled with the same `device` as its counters so that bytes written since
// boot and wear read side by side. `type` is JEDEC's: A the SLC-mode areas (boot partitions,
// enhanced user area), B the main MLC/TLC area, which holds the file systems.
inline constexpr kiwi::MetricSpec kLifeUsedLower = kiwi::gauge(
    "diskio_emmc_life_used_lower_ratio", kiwi::Unit::ratio, "device,type",
    "share of its estimated life the eMMC has used, at least: the lower end of the band the "
    "device reports in <sysfs>/block/<device>/device/life_time (0x01 0 to 10 %, ... 0x0a 90 to "
    "100 %, 0x0b past its life: 1)");
inline constexpr kiwi::MetricSpec kLifeUsedUpper = kiwi::gauge(
    "diskio_emmc_life_used_upper_ratio", kiwi::Unit::ratio, "device,type",
    "share of its estimated life the eMMC has used, at most: the upper end of the band in "
    "life_time (0x01 0.1, ... 0x0a 1; 0x0b, past its life, 1 too)");
inline constexpr kiwi::MetricSpec kPreEol =
    kiwi::gauge("diskio_emmc_pre_eol_level", kiwi::Unit::none, "device",
                "the eMMC's reserved blocks: 1 normal, 2 warning (80 % consumed), 3 urgent "
                "(<sysfs>/block/<device>/device/pre_eol_info)");
inline constexpr kiwi::MetricSpec kWearMetrics[] = {kLifeUsedLower, kLifeUsedUpper, kPreEol};

// Every metric the sensor may emit: the counter and rate rows, then the wear rows. plugin.cpp
// registers it (it is the HELP text of /metrics); the unit tests check every emitted metric
// against it.
inline constexpr auto kMetricSpecs = [] {
  std::array<kiwi::MetricSpec, 2 * std::size(kCounterColumns) + std::size(kWearMetrics)> all{};
  std::size_t n = 0;
  for (const auto& c : kCounterColumns) {
    all[n++] = c.counter;
    all[n++] = c.rate;
  }
  for (const auto& m : kWearMetrics) all[n++] = m;
  return all;
}();

class DiskioSensor final : public kiwi::Sensor {
 public:
  // Copies the roots and options; reads nothing, so a missing file shows up in the first sample.
  explicit DiskioSensor(const kiwi::SensorContext& ctx);

  kiwi::SampleResult sample(kiwi::MetricSink& sink) override;

 private:
  // Emits the wear of the card whose device directory is `dir`: a file that is missing is no
  // data, one that cannot be read or parsed is noted in reads_, a value the device leaves
  // undefined (0x00) goes to `notes`.
  void emit_wear(const std::string& device, const std::string& dir, kiwi::MetricSink& sink,
                 std::vector<std::string>& notes);

  std::string procfs_;
  std::string sysfs_;
  kiwi::KeptFile diskstats_;  // <procfs>/diskstats
  kiwi::NameFilter filter_;   // the include and exclude options
  bool partitions_;
  bool wear_;
  kiwi::Logger& log_;
  // Which devices of the last diskstats are reported, looked up in <sysfs>/block again only when
  // its list of names changes (a stat per device per sample otherwise), and for each reported MMC
  // card the directory its wear is read from ("" for the others).
  std::vector<std::string> names_;
  std::vector<char> reported_;
  std::vector<std::string> wear_dirs_;
  std::string note_;
  kiwi::AttributeReads reads_;  // names a wear file that cannot be read or parsed, logged once
};

}  // namespace kiwi::diskio
