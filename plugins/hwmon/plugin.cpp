// Registration glue only: the logic is in hwmon_sensor.cpp and hwmon_parse.cpp, the option and
// metric tables in hwmon_sensor.hpp.
#include "hwmon_sensor.hpp"

KIWI_SENSOR_PLUGIN(kiwi::hwmon::HwmonSensor, "hwmon",
                   "Fan speeds and duty cycles, voltages, currents, power and their alarms from "
                   "hwmon chips",
                   kiwi::hwmon::kOptions, kiwi::hwmon::kMetricSpecs)
