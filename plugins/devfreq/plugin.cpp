// Registration glue only: the logic is in devfreq_sensor.cpp and devfreq_parse.cpp, the metric
// table in devfreq_sensor.hpp. The plugin has no options.
#include "devfreq_sensor.hpp"

KIWI_SENSOR_PLUGIN(kiwi::devfreq::DevfreqSensor, "devfreq",
                   "GPU, NPU and memory controller frequency and load from /sys/class/devfreq",
                   kiwi::no_options, kiwi::devfreq::kMetrics)
