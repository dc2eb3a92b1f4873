// Registration glue only: the logic is in pressure_sensor.cpp and pressure_parse.cpp, the metric
// table in pressure_sensor.hpp. The plugin has no options.
#include "pressure_sensor.hpp"

KIWI_SENSOR_PLUGIN(kiwi::pressure::PressureSensor, "pressure",
                   "pressure stall information (cpu, memory, io), OOM kills, major faults, swap "
                   "traffic and boot time, from /proc",
                   kiwi::no_options, kiwi::pressure::kMetrics)
