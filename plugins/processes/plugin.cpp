// Registration glue only: the logic is in processes_sensor.cpp and processes_parse.cpp, the option
// and metric tables in processes_sensor.hpp.
#include "processes_sensor.hpp"

KIWI_SENSOR_PLUGIN(kiwi::processes::ProcessesSensor, "processes",
                   "processes by state, and the top N by CPU and by resident memory with pid and "
                   "command name, from /proc/[pid]/stat",
                   kiwi::processes::kOptions, kiwi::processes::kMetrics)
