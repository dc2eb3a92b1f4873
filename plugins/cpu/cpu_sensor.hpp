// The cpu sensor: usage ratios from /proc/stat deltas, per-core frequency from cpufreq, load
// averages. See README.md for the metrics.
#pragma once

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
     "emit cpu_core_usage_ratio and cpu_frequency_hertz for every core (false: totals only)"},
};

// Every metric the sensor may emit: name, unit, counter, labels, help. plugin.cpp registers it
// (it is the HELP text of /metrics); the unit tests check every emitted metric against it.
inline constexpr kiwi::MetricSpec kMetricSpecs[] = {
    {"cpu_usage_ratio", "ratio", false, "",
     "busy share of all cores since the last sample (/proc/stat)"},
    {"cpu_core_usage_ratio", "ratio", false, "core",
     "busy share of one core since the last sample (/proc/stat)"},
    {"cpu_mode_ratio", "ratio", false, "mode",
     "share of all CPU time spent in each mode since the last sample (/proc/stat)"},
    {"cpu_frequency_hertz", "hertz", false, "core",
     "current core frequency (cpufreq scaling_cur_freq)"},
    {"cpu_load1", "", false, "", "load average over 1 minute (/proc/loadavg)"},
    {"cpu_load5", "", false, "", "load average over 5 minutes (/proc/loadavg)"},
    {"cpu_load15", "", false, "", "load average over 15 minutes (/proc/loadavg)"},
};

class CpuSensor final : public kiwi::Sensor {
 public:
  // Copies the roots and options; reads nothing, so a missing file shows up in the first sample.
  explicit CpuSensor(const kiwi::SensorContext& ctx);

  kiwi::SampleResult sample(kiwi::MetricSink& sink) override;

 private:
  std::string procfs_;
  std::string sysfs_;
  bool per_core_;
  kiwi::Logger& log_;
  // The previous reading; nullopt before the first sample. Cores are keyed by number so a core
  // going offline or coming back never shifts another core's deltas.
  std::optional<ProcStat> previous_;
};

}  // namespace kiwi::cpu
