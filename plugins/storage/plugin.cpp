// Registration glue only: the logic is in storage_sensor.cpp, the option table in
// storage_sensor.hpp.
#include "storage_sensor.hpp"

namespace {
constexpr kiwi::MetricSpec kMetrics[] = {
    {"storage_size_bytes", "bytes", false, "mount", "filesystem size (statvfs f_blocks x f_frsize)"},
    {"storage_available_bytes", "bytes", false, "mount", "space available to unprivileged users (f_bavail)"},
    {"storage_used_bytes", "bytes", false, "mount", "space in use: size minus free (f_bfree)"},
    {"storage_used_ratio", "ratio", false, "mount", "used / (used + available), as df reports Use%"},
    {"storage_inodes", "count", false, "mount", "inodes on the filesystem (f_files)"},
    {"storage_inodes_free", "count", false, "mount", "free inodes (f_ffree)"},
    {"storage_readonly", "", false, "mount", "1 if the filesystem is mounted read-only, else 0"},
};
}  // namespace

KIWI_SENSOR_PLUGIN(kiwi::storage::StorageSensor, "storage",
                   "Size, use and inodes of mounted filesystems (statvfs)", kiwi::storage::kOptions,
                   kMetrics)
