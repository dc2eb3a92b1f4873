// Registration glue only: the logic is in cpufreq_sensor.cpp and cpufreq_parse.cpp, the metric
// table in cpufreq_sensor.hpp. The plugin has no options.
#include "cpufreq_sensor.hpp"

KIWI_SENSOR_PLUGIN(kiwi::cpufreq::CpufreqSensor, "cpufreq",
                   "CPU frequency policies: frequency, limits, hardware range and governor",
                   kiwi::no_options, kiwi::cpufreq::kMetrics)
