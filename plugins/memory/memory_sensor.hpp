// The memory sensor: RAM and swap from /proc/meminfo. See README.md for the metrics.
#pragma once

#include <array>
#include <kiwi/io.hpp>
#include <kiwi/sensor.hpp>
#include <optional>
#include <string>

#include "memory_parse.hpp"

namespace kiwi::memory {

// The metrics, each declared once with the MemoryStats field it comes from, in emit order: the
// sensor emits through these rows, and kMetricSpecs (plugin.cpp registers it) is the HELP text of
// /metrics and the README table.
struct MetricField {
  kiwi::MetricSpec metric;
  std::optional<double> MemoryStats::*field;
};
inline constexpr MetricField kMetrics[] = {
    {kiwi::gauge("memory_total_bytes", kiwi::Unit::bytes, "",
                 "usable RAM (MemTotal in /proc/meminfo)"),
     &MemoryStats::total_bytes},
    {kiwi::gauge("memory_available_bytes", kiwi::Unit::bytes, "",
                 "RAM available for new work without swapping (MemAvailable)"),
     &MemoryStats::available_bytes},
    {kiwi::gauge("memory_used_bytes", kiwi::Unit::bytes, "", "RAM in use: total minus available"),
     &MemoryStats::used_bytes},
    {kiwi::gauge("memory_used_ratio", kiwi::Unit::ratio, "", "RAM in use as a share of total"),
     &MemoryStats::used_ratio},
    {kiwi::gauge("memory_cached_bytes", kiwi::Unit::bytes, "",
                 "page cache (Cached in /proc/meminfo)"),
     &MemoryStats::cached_bytes},
    {kiwi::gauge("memory_buffers_bytes", kiwi::Unit::bytes, "",
                 "block device buffers (Buffers in /proc/meminfo)"),
     &MemoryStats::buffers_bytes},
    {kiwi::gauge("memory_swap_total_bytes", kiwi::Unit::bytes, "", "swap space (SwapTotal)"),
     &MemoryStats::swap_total_bytes},
    {kiwi::gauge("memory_swap_used_bytes", kiwi::Unit::bytes, "",
                 "swap in use: SwapTotal minus SwapFree"),
     &MemoryStats::swap_used_bytes},
};
inline constexpr auto kMetricSpecs = [] {
  std::array<kiwi::MetricSpec, std::size(kMetrics)> all{};
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = kMetrics[i].metric;
  return all;
}();

class MemorySensor final : public kiwi::Sensor {
 public:
  // Copies the procfs root; reads nothing. The plugin has no options.
  explicit MemorySensor(const kiwi::SensorContext& ctx);

  kiwi::SampleResult sample(kiwi::MetricSink& sink) override;

 private:
  std::string procfs_;
  kiwi::KeptFile meminfo_;  // <procfs>/meminfo
  kiwi::Logger& log_;
  bool logged_estimate_ = false;  // say once in the log, not every second, that we estimate
};

}  // namespace kiwi::memory
