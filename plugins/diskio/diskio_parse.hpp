// Pure functions for the diskio sensor: /proc/diskstats text and the rates between two readings.
// No file I/O here, so every function is tested on fixture text (tests/unit/sensors/).
#pragma once

#include <array>
#include <cstdint>
#include <kiwi/plugin.hpp>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiwi::diskio {

// The first 11 counters after the device name in /proc/diskstats (Documentation/admin-guide/
// iostats.rst): reads completed, reads merged, sectors read, ms reading, writes completed, writes
// merged, sectors written, ms writing, I/Os in progress, ms doing I/O (io_ticks), weighted ms.
// Kernels 4.18+ append 4 discard columns and 5.5+ 2 flush columns, which are not used.
using Counters = std::array<std::uint64_t, 11>;

// One rate metric per diskstats column we report, declared once: the sensor emits through these
// rows and kMetricSpecs (diskio_sensor.hpp) is made of them. The one table the sensor, the tests
// and the README follow. value = delta(column) * multiplier / (divisor * elapsed seconds), capped
// at `ceiling`; a multiplier and a divisor rather than one factor so 250 ms of io_ticks over 1 s is
// exactly 0.25 and not 250 * 0.001.
struct RateColumn {
  kiwi::MetricSpec metric;
  std::size_t column;  // index into Counters
  double multiplier;
  double divisor;
  double ceiling;
};
inline constexpr double kNoCeiling = std::numeric_limits<double>::infinity();
inline constexpr RateColumn kRateColumns[] = {
    // diskstats counts 512-byte sectors whatever the device's real sector size.
    {kiwi::gauge(
         "diskio_read_bytes_per_second", kiwi::Unit::bytes_per_second, "device",
         "bytes read per second since the last sample (/proc/diskstats sectors read x 512)"),
     2, 512, 1, kNoCeiling},
    {kiwi::gauge(
         "diskio_write_bytes_per_second", kiwi::Unit::bytes_per_second, "device",
         "bytes written per second since the last sample (/proc/diskstats sectors written x 512)"),
     6, 512, 1, kNoCeiling},
    {kiwi::gauge("diskio_reads_per_second", kiwi::Unit::per_second, "device",
                 "reads completed per second (/proc/diskstats)"),
     0, 1, 1, kNoCeiling},
    {kiwi::gauge("diskio_writes_per_second", kiwi::Unit::per_second, "device",
                 "writes completed per second (/proc/diskstats)"),
     4, 1, 1, kNoCeiling},
    // io_ticks: milliseconds with at least one I/O in flight. Capped because the counter and the
    // clock are read a little apart, so a saturated disk can show 1.002.
    {kiwi::gauge("diskio_busy_ratio", kiwi::Unit::ratio, "device",
                 "share of the time the device had I/O in flight (/proc/diskstats io_ticks)"),
     9, 1, 1000, 1.0},
};

struct DiskCounters {
  std::string name;  // as in diskstats: "mmcblk0", "nvme0n1p1", "cciss/c0d0"
  Counters counters{};
};

// Parses /proc/diskstats in file order. Throws std::invalid_argument naming the line if a line has
// fewer than 3 + 11 fields or a counter that is not a number.
std::vector<DiskCounters> parse_diskstats(std::string_view text);

// Per-second rates of one device between two readings, in kRateColumns order. nullopt if any
// counter went backwards (a device unplugged and plugged in again under the same name) or
// elapsed_seconds is not positive.
using Rates = std::array<double, std::size(kRateColumns)>;
std::optional<Rates> compute_rates(const Counters& before, const Counters& after,
                                   double elapsed_seconds);

// The sysfs name of a block device: '/' in a diskstats name is '!' in sysfs ("cciss/c0d0" is
// <sysfs>/block/cciss!c0d0).
std::string sysfs_block_name(std::string_view diskstats_name);

}  // namespace kiwi::diskio
