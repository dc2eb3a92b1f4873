// Pure functions for the diskio sensor: /proc/diskstats text, sysfs names and eMMC wear.
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

// eMMC wear. Since Linux 4.11 the mmc driver shows three EXT_CSD bytes of an eMMC 5.0 or later
// (JEDEC JESD84-B50) in <sysfs>/block/mmcblkN/device/: DEVICE_LIFE_TIME_EST_TYP_A and _TYP_B
// (bytes 268, 269) in `life_time` ("0x01 0x02\n", type A first), PRE_EOL_INFO (267) in
// `pre_eol_info` ("0x01\n"). 0x00 in any of them means the device does not define it. SD cards
// have neither file.

// Whether a diskstats name is an MMC or SD card itself ("mmcblk0"), not one of its boot areas
// ("mmcblk0boot0", which shows the same card's files) or a partition: where wear is read.
bool is_mmc_card(std::string_view name);

// One EXT_CSD byte as these files print it: hex with or without 0x, either case ("0x0b", "0B",
// and "01" as the first kernels with pre_eol_info print it). nullopt for anything else.
std::optional<std::uint8_t> parse_ext_csd_byte(std::string_view text);

// `life_time`: the type A and the type B estimate. nullopt unless it is exactly two such bytes.
std::optional<std::array<std::uint8_t, 2>> parse_life_time(std::string_view text);

// The share of its estimated life a device has used, as a DEVICE_LIFE_TIME_EST value bands it:
// 0x01 is 0 to 10 % (lower 0, upper 0.1), ... 0x0A 90 to 100 %, 0x0B "exceeded its maximum
// estimated device life time" (lower 1 and upper 1: past the end, which no ratio can say). nullopt
// for 0x00 (not defined by the device) and 0x0C to 0xFF (reserved by JEDEC).
struct LifeUsed {
  double lower;
  double upper;
};
std::optional<LifeUsed> life_used(std::uint8_t estimate);

// PRE_EOL_INFO, the state of the reserved blocks that replace worn-out ones: 1 normal, 2 warning
// (80 % of them consumed), 3 urgent. nullopt for 0x00 (not defined) and 0x04 to 0xFF (reserved).
std::optional<std::uint8_t> pre_eol_level(std::uint8_t pre_eol_info);

}  // namespace kiwi::diskio
