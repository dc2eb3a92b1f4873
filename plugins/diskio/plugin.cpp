// Registration glue only: the logic is in diskio_sensor.cpp, the option and metric tables in
// diskio_sensor.hpp.
#include "diskio_sensor.hpp"

KIWI_SENSOR_PLUGIN(kiwi::diskio::DiskioSensor, "diskio",
                   "Per block device throughput, IOPS and busy ratio from /proc/diskstats, and "
                   "an eMMC's wear from sysfs",
                   kiwi::diskio::kOptions, kiwi::diskio::kMetricSpecs)
