// Pure functions for the diskio sensor: /proc/diskstats text and the rates between two readings.
// No file I/O here, so every function is tested on fixture text (tests/unit/sensors/).
#pragma once

#include <array>
#include <cstdint>
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

// One rate metric per diskstats column we report: the one table the sensor, the tests and the
// README follow. value = delta(column) * multiplier / (divisor * elapsed seconds), capped at
// `ceiling`; a multiplier and a divisor rather than one factor so 250 ms of io_ticks over 1 s is
// exactly 0.25 and not 250 * 0.001.
struct RateColumn {
  std::string_view metric;
  std::string_view unit;
  std::size_t column;  // index into Counters
  double multiplier;
  double divisor;
  double ceiling;
};
inline constexpr double kNoCeiling = std::numeric_limits<double>::infinity();
inline constexpr RateColumn kRateColumns[] = {
    // diskstats counts 512-byte sectors whatever the device's real sector size.
    {"diskio_read_bytes_per_second", "bytes_per_second", 2, 512, 1, kNoCeiling},
    {"diskio_write_bytes_per_second", "bytes_per_second", 6, 512, 1, kNoCeiling},
    {"diskio_reads_per_second", "per_second", 0, 1, 1, kNoCeiling},
    {"diskio_writes_per_second", "per_second", 4, 1, 1, kNoCeiling},
    // io_ticks: milliseconds with at least one I/O in flight. Capped because the counter and the
    // clock are read a little apart, so a saturated disk can show 1.002.
    {"diskio_busy_ratio", "ratio", 9, 1, 1000, 1.0},
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
