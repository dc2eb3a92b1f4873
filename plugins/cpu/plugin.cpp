// Registration glue only: the logic is in cpu_sensor.cpp, the option table in cpu_sensor.hpp.
#include "cpu_sensor.hpp"

namespace {
constexpr kiwi::MetricSpec kMetrics[] = {
    {"cpu_usage_ratio", "ratio", false, "", "busy share of all cores since the last sample (/proc/stat)"},
    {"cpu_core_usage_ratio", "ratio", false, "core", "busy share of one core since the last sample (/proc/stat)"},
    {"cpu_mode_ratio", "ratio", false, "mode", "share of all CPU time spent in each mode since the last sample (/proc/stat)"},
    {"cpu_frequency_hertz", "hertz", false, "core", "current core frequency (cpufreq scaling_cur_freq)"},
    {"cpu_load1", "", false, "", "load average over 1 minute (/proc/loadavg)"},
    {"cpu_load5", "", false, "", "load average over 5 minutes (/proc/loadavg)"},
    {"cpu_load15", "", false, "", "load average over 15 minutes (/proc/loadavg)"},
};
}  // namespace

KIWI_SENSOR_PLUGIN(kiwi::cpu::CpuSensor, "cpu", "CPU usage, per-core frequency and load average",
                   kiwi::cpu::kOptions, kMetrics)
