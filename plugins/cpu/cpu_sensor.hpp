// The cpu sensor: usage ratios from /proc/stat deltas, per-core frequency from cpufreq, load
// averages. See README.md for the metrics.
#pragma once

#include <kiwi/io.hpp>
#include <kiwi/sensor.hpp>
#include <map>
#include <optional>
#include <string>

#include "cpu_parse.hpp"

namespace kiwi::cpu {

// The one place the cpu options and their defaults are declared (plugin.cpp registers it; the
// host fills in defaults; tests build Options from it).
inline constexpr kiwi::OptionSpec kOptions[] = {
    {"per_core", kiwi::OptionType::boolean, "true",
     "emit cpu_core_usage_ratio, cpu_core_seconds_total and cpu_frequency_hertz for every core "
     "(false: totals only)"},
};

// Every metric the sensor may emit, each declared once: the sensor emits through these rows, and
// kMetricSpecs (plugin.cpp registers it) is the HELP text of /metrics and the README table.
using kiwi::MetricKind;
using kiwi::Unit;
inline constexpr kiwi::MetricSpec kUsage{
    "cpu_usage_ratio", Unit::ratio, MetricKind::gauge, "",
    "busy share of all cores since the last sample (/proc/stat)"};
inline constexpr kiwi::MetricSpec kCoreUsage{
    "cpu_core_usage_ratio", Unit::ratio, MetricKind::gauge, "core",
    "busy share of one core since the last sample (/proc/stat)"};
inline constexpr kiwi::MetricSpec kModeShare{
    "cpu_mode_ratio", Unit::ratio, MetricKind::gauge, "mode",
    "share of all CPU time spent in each mode since the last sample (/proc/stat)"};
inline constexpr kiwi::MetricSpec kFrequency{"cpu_frequency_hertz", Unit::hertz, MetricKind::gauge,
                                             "core",
                                             "current core frequency (cpufreq scaling_cur_freq)"};
inline constexpr kiwi::MetricSpec kLoad1{"cpu_load1", Unit::none, MetricKind::gauge, "",
                                         "load average over 1 minute (/proc/loadavg)"};
inline constexpr kiwi::MetricSpec kLoad5{"cpu_load5", Unit::none, MetricKind::gauge, "",
                                         "load average over 5 minutes (/proc/loadavg)"};
inline constexpr kiwi::MetricSpec kLoad15{"cpu_load15", Unit::none, MetricKind::gauge, "",
                                          "load average over 15 minutes (/proc/loadavg)"};
// The kernel's counters, for Prometheus' rate(): /proc/stat ticks over USER_HZ. No `rate`: the
// ratios above are shares of one interval's ticks, which the sensor computes.
inline constexpr kiwi::MetricSpec kSeconds = kiwi::counter(
    "cpu_seconds_total", Unit::seconds, "mode",
    "CPU time spent in each mode since boot, all cores together (/proc/stat ticks / USER_HZ)");
inline constexpr kiwi::MetricSpec kCoreSeconds =
    kiwi::counter("cpu_core_seconds_total", Unit::seconds, "core,mode",
                  "CPU time one core spent in each mode since boot (/proc/stat ticks / USER_HZ)");
inline constexpr kiwi::MetricSpec kMetricSpecs[] = {
    kUsage, kCoreUsage, kModeShare, kFrequency, kLoad1, kLoad5, kLoad15, kSeconds, kCoreSeconds};

class CpuSensor final : public kiwi::Sensor {
 public:
  // Copies the roots and options; reads nothing, so a missing file shows up in the first sample.
  explicit CpuSensor(const kiwi::SensorContext& ctx);

  kiwi::SampleResult sample(kiwi::MetricSink& sink) override;

 private:
  std::string procfs_;
  std::string sysfs_;
  kiwi::KeptFile stat_;                      // <procfs>/stat
  kiwi::KeptFile loadavg_;                   // <procfs>/loadavg
  std::map<int, kiwi::KeptFile> frequency_;  // each online core's scaling_cur_freq
  bool per_core_;
  double user_hz_;  // ticks per second of /proc/stat (sysconf _SC_CLK_TCK: 100 on Linux)
  kiwi::Logger& log_;
  // The previous reading; nullopt before the first sample. Cores are keyed by number so a core
  // going offline or coming back never shifts another core's deltas.
  std::optional<ProcStat> previous_;
  std::string last_skipped_note_;  // the previous sample's "counters went backwards" note, or ""
};

}  // namespace kiwi::cpu
