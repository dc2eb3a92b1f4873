// The memory sensor: RAM and swap from /proc/meminfo. See README.md for the metrics.
#pragma once

#include <kiwi/sensor.hpp>
#include <string>

namespace kiwi::memory {

// Every metric the sensor may emit: name, unit, counter, labels, help. plugin.cpp registers it
// (it is the HELP text of /metrics); the unit tests check every emitted metric against it.
inline constexpr kiwi::MetricSpec kMetricSpecs[] = {
    {"memory_total_bytes", "bytes", false, "", "usable RAM (MemTotal in /proc/meminfo)"},
    {"memory_available_bytes", "bytes", false, "",
     "RAM available for new work without swapping (MemAvailable)"},
    {"memory_used_bytes", "bytes", false, "", "RAM in use: total minus available"},
    {"memory_used_ratio", "ratio", false, "", "RAM in use as a share of total"},
    {"memory_cached_bytes", "bytes", false, "", "page cache (Cached in /proc/meminfo)"},
    {"memory_buffers_bytes", "bytes", false, "", "block device buffers (Buffers in /proc/meminfo)"},
    {"memory_swap_total_bytes", "bytes", false, "", "swap space (SwapTotal)"},
    {"memory_swap_used_bytes", "bytes", false, "", "swap in use: SwapTotal minus SwapFree"},
};

class MemorySensor final : public kiwi::Sensor {
 public:
  // Copies the procfs root; reads nothing. The plugin has no options.
  explicit MemorySensor(const kiwi::SensorContext& ctx);

  kiwi::SampleResult sample(kiwi::MetricSink& sink) override;

 private:
  std::string procfs_;
  kiwi::Logger& log_;
  bool logged_estimate_ = false;  // say once in the log, not every second, that we estimate
};

}  // namespace kiwi::memory
