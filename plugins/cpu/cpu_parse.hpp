// Pure parsers for the cpu sensor: /proc/stat, /proc/loadavg and cpufreq text. No file I/O here,
// so every function is tested on fixture text (tests/unit/sensors/test_cpu.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string_view>

namespace kiwi::cpu {

// The /proc/stat columns we use, in kernel order. guest and guest_nice (columns 9 and 10) are
// already counted inside user and nice, so they are left out and never double counted.
inline constexpr std::array<std::string_view, 8> kModeNames = {
    "user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"};
inline constexpr std::size_t kIdle = 3;
inline constexpr std::size_t kIowait = 4;

// Cumulative time per mode in USER_HZ ticks since boot, indexed like kModeNames.
struct CpuTimes {
  std::array<std::uint64_t, kModeNames.size()> ticks{};

  std::uint64_t total() const;
};

struct ProcStat {
  std::optional<CpuTimes> all;    // the "cpu" line
  std::map<int, CpuTimes> cores;  // "cpuN" lines keyed by N; offline cores are absent
};

// Parses /proc/stat. Lines other than cpu/cpuN are ignored; missing trailing columns (kernels
// older than 2.6.33 have fewer) count as 0. Throws std::invalid_argument naming the line if a cpu
// line has fewer than 4 numbers or a field that is not a number.
ProcStat parse_proc_stat(std::string_view text);

struct CpuRatios {
  double usage = 0;                               // 1 - (idle + iowait) / total
  std::array<double, kModeNames.size()> modes{};  // share of total per mode
};

// Ratios over the interval between two readings, each clamped to [0, 1]. nullopt when any counter
// went backwards (suspend/resume, counter reset, a core replaced) or nothing advanced: no ratio is
// better than a garbage one.
std::optional<CpuRatios> compute_ratios(const CpuTimes& before, const CpuTimes& after);

struct LoadAvg {
  double load1 = 0;
  double load5 = 0;
  double load15 = 0;
};

// Parses /proc/loadavg ("0.52 0.58 0.59 2/412 12345"); nullopt if the first three fields are not
// numbers.
std::optional<LoadAvg> parse_loadavg(std::string_view text);

// Parses a cpufreq file such as scaling_cur_freq (kHz) into hertz; nullopt if not a number.
std::optional<double> parse_khz_as_hertz(std::string_view text);

}  // namespace kiwi::cpu
