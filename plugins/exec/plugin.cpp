// Registration glue only: the logic is in exec_sensor.cpp and exec_parse.cpp, the option table in
// exec_sensor.hpp. The metrics are the program's, not known in advance.
#include "exec_sensor.hpp"

KIWI_SENSOR_PLUGIN(kiwi::exec::ExecSensor, "exec",
                   "runs a program and reads the metrics it prints (Prometheus text or JSON)",
                   kiwi::exec::kOptions, kiwi::no_metrics)
