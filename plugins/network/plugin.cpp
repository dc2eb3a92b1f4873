// Registration glue only: the logic is in network_sensor.cpp, the option and metric tables in
// network_sensor.hpp.
#include "network_sensor.hpp"

KIWI_SENSOR_PLUGIN(kiwi::network::NetworkSensor, "network",
                   "Per-interface receive and transmit rates, link speed and utilisation",
                   kiwi::network::kOptions, kiwi::network::kMetricSpecs)
