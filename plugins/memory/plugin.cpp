// Registration glue only: the logic is in memory_sensor.cpp, the metric table in memory_sensor.hpp.
// The plugin has no options.
#include "memory_sensor.hpp"

KIWI_SENSOR_PLUGIN(kiwi::memory::MemorySensor, "memory", "RAM and swap usage from /proc/meminfo",
                   kiwi::no_options, kiwi::memory::kMetricSpecs)
