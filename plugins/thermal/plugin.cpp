// Registration glue only: the logic is in thermal_sensor.cpp, the option and metric tables in
// thermal_sensor.hpp.
#include "thermal_sensor.hpp"

KIWI_SENSOR_PLUGIN(kiwi::thermal::ThermalSensor, "thermal",
                   "Temperatures from thermal zones and hwmon chips, and their maximum",
                   kiwi::thermal::kOptions, kiwi::thermal::kMetricSpecs)
