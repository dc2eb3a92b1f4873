// Registration glue only: the logic is in power_sensor.cpp and power_parse.cpp, the metric table
// in power_sensor.hpp. The plugin has no options.
#include "power_sensor.hpp"

KIWI_SENSOR_PLUGIN(kiwi::power::PowerSensor, "power",
                   "Raspberry Pi under-voltage and throttling, now and since boot, from the "
                   "firmware and the rpi_volt hwmon",
                   kiwi::no_options, kiwi::power::kMetrics)
