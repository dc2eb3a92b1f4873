// Registration glue only: the logic is in clock_sensor.cpp and clock_timex.cpp, the metric table
// in clock_sensor.hpp. The plugin has no options.
#include "clock_sensor.hpp"

KIWI_SENSOR_PLUGIN(kiwi::clock::ClockSensor, "clock",
                   "whether the kernel's clock is synchronised and how far off it may be, from "
                   "adjtimex(2)",
                   kiwi::no_options, kiwi::clock::kMetrics)
