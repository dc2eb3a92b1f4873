// Registration glue only: the logic is in thermal_sensor.cpp, the option table in
// thermal_sensor.hpp.
#include "thermal_sensor.hpp"

namespace {
constexpr kiwi::MetricSpec kMetrics[] = {
    {"thermal_celsius", "celsius", false, "sensor", "temperature of one thermal zone or hwmon sensor (sysfs)"},
    {"thermal_max_celsius", "celsius", false, "", "the hottest of the reported temperatures"},
};
}  // namespace

KIWI_SENSOR_PLUGIN(kiwi::thermal::ThermalSensor, "thermal",
                   "Temperatures from thermal zones and hwmon chips, and their maximum",
                   kiwi::thermal::kOptions, kMetrics)
