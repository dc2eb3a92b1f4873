// The pressure sensor: pressure stall information (PSI) for cpu, memory and io, the kernel's
// memory events that matter on a small board (OOM kills, major faults, swap traffic) and the boot
// time. See README.md.
#pragma once

#include <array>
#include <kiwi/io.hpp>
#include <kiwi/sensor.hpp>
#include <string>
#include <vector>

namespace kiwi::pressure {

inline constexpr kiwi::MetricSpec kSomeRatio = kiwi::gauge(
    "pressure_some_ratio", kiwi::Unit::ratio, "resource,window",
    "share of time in which at least one task waited for the resource (cpu, memory, io), averaged "
    "over the window (10s, 60s, 300s: avg10, avg60, avg300 of <procfs>/pressure/<resource>)");
inline constexpr kiwi::MetricSpec kFullRatio = kiwi::gauge(
    "pressure_full_ratio", kiwi::Unit::ratio, "resource,window",
    "share of time in which every task that wanted to run waited for the resource at once "
    "(memory, io; cpu's is always 0 system-wide), averaged over the window");
inline constexpr kiwi::MetricSpec kSomeSeconds = kiwi::counter(
    "pressure_some_stalled_seconds_total", kiwi::Unit::seconds, "resource",
    "time in which at least one task waited for the resource (the some line's total)");
inline constexpr kiwi::MetricSpec kFullSeconds = kiwi::counter(
    "pressure_full_stalled_seconds_total", kiwi::Unit::seconds, "resource",
    "time in which every task that wanted to run waited for the resource (the full line's total)");
inline constexpr kiwi::MetricSpec kOomKills =
    kiwi::counter("vm_oom_kills_total", kiwi::Unit::count, "",
                  "processes the kernel's out-of-memory killer ended (oom_kill in <procfs>/vmstat, "
                  "Linux 4.13 and later)");
inline constexpr kiwi::MetricSpec kMajorFaults =
    kiwi::counter("vm_major_faults_total", kiwi::Unit::count, "",
                  "page faults that had to read from storage (pgmajfault in <procfs>/vmstat)",
                  "vm_major_faults_per_second");
inline constexpr kiwi::MetricSpec kMajorFaultsRate =
    kiwi::gauge("vm_major_faults_per_second", kiwi::Unit::per_second, "",
                "page faults that read from storage, per second");
inline constexpr kiwi::MetricSpec kSwapIn = kiwi::counter(
    "vm_swap_in_pages_total", kiwi::Unit::count, "",
    "pages read back in from swap (pswpin in <procfs>/vmstat)", "vm_swap_in_pages_per_second");
inline constexpr kiwi::MetricSpec kSwapInRate = kiwi::gauge(
    "vm_swap_in_pages_per_second", kiwi::Unit::per_second, "", "pages read from swap, per second");
inline constexpr kiwi::MetricSpec kSwapOut = kiwi::counter(
    "vm_swap_out_pages_total", kiwi::Unit::count, "",
    "pages written out to swap (pswpout in <procfs>/vmstat)", "vm_swap_out_pages_per_second");
inline constexpr kiwi::MetricSpec kSwapOutRate =
    kiwi::gauge("vm_swap_out_pages_per_second", kiwi::Unit::per_second, "",
                "pages written to swap, per second");
inline constexpr kiwi::MetricSpec kBootTime =
    kiwi::gauge("boot_time_seconds", kiwi::Unit::seconds, "",
                "when the system booted, unix seconds (btime in <procfs>/stat)");

inline constexpr kiwi::MetricSpec kMetrics[] = {
    kSomeRatio,       kFullRatio, kSomeSeconds, kFullSeconds, kOomKills,    kMajorFaults,
    kMajorFaultsRate, kSwapIn,    kSwapInRate,  kSwapOut,     kSwapOutRate, kBootTime,
};

class PressureSensor final : public kiwi::Sensor {
 public:
  // Copies the procfs root; reads nothing. The plugin has no options.
  explicit PressureSensor(const kiwi::SensorContext& ctx);

  kiwi::SampleResult sample(kiwi::MetricSink& sink) override;

 private:
  std::array<kiwi::KeptFile, 3> psi_;  // <procfs>/pressure/{cpu,memory,io}
  kiwi::KeptFile vmstat_;              // <procfs>/vmstat
  kiwi::KeptFile stat_;                // <procfs>/stat
  // Reads and parses `file` (parse(text)); false when it is missing, off (psi=0), or failed (then
  // named in failed_).
  template <class Parse>
  bool read(kiwi::KeptFile& file, Parse&& parse);

  std::string pressure_dir_;  // for the message when it is missing
  kiwi::Logger& log_;
  std::string text_;                 // the file being read, its storage reused
  bool psi_off_ = false;             // this sample: PSI files there but off
  std::vector<std::string> failed_;  // this sample: files that could not be read or parsed
  std::string last_logged_;          // the failure last logged
};

}  // namespace kiwi::pressure
