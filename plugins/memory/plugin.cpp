// Registration glue only: the logic is in memory_sensor.cpp. The plugin has no options.
#include "memory_sensor.hpp"

namespace {
constexpr kiwi::MetricSpec kMetrics[] = {
    {"memory_total_bytes", "bytes", false, "", "usable RAM (MemTotal in /proc/meminfo)"},
    {"memory_available_bytes", "bytes", false, "", "RAM available for new work without swapping (MemAvailable)"},
    {"memory_used_bytes", "bytes", false, "", "RAM in use: total minus available"},
    {"memory_used_ratio", "ratio", false, "", "RAM in use as a share of total"},
    {"memory_cached_bytes", "bytes", false, "", "page cache (Cached in /proc/meminfo)"},
    {"memory_buffers_bytes", "bytes", false, "", "block device buffers (Buffers in /proc/meminfo)"},
    {"memory_swap_total_bytes", "bytes", false, "", "swap space (SwapTotal)"},
    {"memory_swap_used_bytes", "bytes", false, "", "swap in use: SwapTotal minus SwapFree"},
};
}  // namespace

KIWI_SENSOR_PLUGIN(kiwi::memory::MemorySensor, "memory", "RAM and swap usage from /proc/meminfo",
                   kiwi::no_options, kMetrics)
