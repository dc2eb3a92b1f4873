// Registration glue only: the logic is in storage_sensor.cpp, the option and metric tables in
// storage_sensor.hpp.
#include "storage_sensor.hpp"

KIWI_SENSOR_PLUGIN(kiwi::storage::StorageSensor, "storage",
                   "Size, use and inodes of mounted filesystems (statvfs)", kiwi::storage::kOptions,
                   kiwi::storage::kMetricSpecs)
