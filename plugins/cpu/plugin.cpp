// Registration glue only: the logic is in cpu_sensor.cpp, the option and metric tables in
// cpu_sensor.hpp.
#include "cpu_sensor.hpp"

KIWI_SENSOR_PLUGIN(kiwi::cpu::CpuSensor, "cpu", "CPU usage, per-core frequency and load average",
                   kiwi::cpu::kOptions, kiwi::cpu::kMetricSpecs)
