// Pure functions for the diskio sensor: /proc/diskstats text and sysfs names.
// No file I/O here, so every function is tested on fixture text (tests/unit/sensors/).
#pragma once

#include <array>
#include <cstdint>
#include <kiwi/plugin.hpp>
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

// One counter per diskstats column we report, with the per-second rate the agent derives from it
// (kiwi/plugin.hpp, MetricSpec::rate), declared once: the sensor emits the counters through these
// rows and kMetricSpecs (diskio_sensor.hpp) is made of them. The one table the sensor, the tests
// and the README follow. The counter is the column in base units: column x multiplier / divisor
// (a multiplier and a divisor rather than one factor, so 250 ms of io_ticks is exactly 0.25 s).
struct CounterColumn {
  kiwi::MetricSpec counter;  // what the kernel counts, in base units
  kiwi::MetricSpec rate;     // its rate, derived by the agent between two samples
  std::size_t column;        // index into Counters
  double multiplier;
  double divisor;
};
constexpr CounterColumn column(std::string_view counter, kiwi::Unit unit, std::size_t column,
                               double multiplier, double divisor, std::string_view counter_help,
                               std::string_view rate, std::string_view rate_help) {
  return {kiwi::counter(counter, unit, "device", counter_help, rate),
          kiwi::gauge(rate, *kiwi::rate_unit(unit), "device", rate_help), column, multiplier,
          divisor};
}
inline constexpr CounterColumn kCounterColumns[] = {
    // diskstats counts 512-byte sectors whatever the device's real sector size.
    column("diskio_read_bytes_total", kiwi::Unit::bytes, 2, 512, 1,
           "bytes read since boot (/proc/diskstats sectors read x 512)",
           "diskio_read_bytes_per_second",
           "bytes read per second since the last sample (/proc/diskstats sectors read x 512)"),
    column("diskio_written_bytes_total", kiwi::Unit::bytes, 6, 512, 1,
           "bytes written since boot (/proc/diskstats sectors written x 512)",
           "diskio_write_bytes_per_second",
           "bytes written per second since the last sample (/proc/diskstats sectors written x "
           "512)"),
    column("diskio_reads_completed_total", kiwi::Unit::count, 0, 1, 1,
           "reads completed since boot (/proc/diskstats)", "diskio_reads_per_second",
           "reads completed per second (/proc/diskstats)"),
    column("diskio_writes_completed_total", kiwi::Unit::count, 4, 1, 1,
           "writes completed since boot (/proc/diskstats)", "diskio_writes_per_second",
           "writes completed per second (/proc/diskstats)"),
    // io_ticks: milliseconds with at least one I/O in flight. Its rate is a ratio, capped at 1 by
    // the agent because the counter and the clock are read a little apart.
    column("diskio_io_time_seconds_total", kiwi::Unit::seconds, 9, 1, 1000,
           "time with I/O in flight since boot (/proc/diskstats io_ticks)", "diskio_busy_ratio",
           "share of the time the device had I/O in flight (/proc/diskstats io_ticks)"),
};

struct DiskCounters {
  std::string name;  // as in diskstats: "mmcblk0", "nvme0n1p1", "cciss/c0d0"
  Counters counters{};
};

// Parses /proc/diskstats in file order. Throws std::invalid_argument naming the line if a line has
// fewer than 3 + 11 fields or a counter that is not a number.
std::vector<DiskCounters> parse_diskstats(std::string_view text);

// The sysfs name of a block device: '/' in a diskstats name is '!' in sysfs ("cciss/c0d0" is
// <sysfs>/block/cciss!c0d0).
std::string sysfs_block_name(std::string_view diskstats_name);

}  // namespace kiwi::diskio
