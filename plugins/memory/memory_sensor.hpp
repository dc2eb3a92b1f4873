// The memory sensor: RAM and swap from /proc/meminfo. See README.md for the metrics.
#pragma once

#include <kiwi/sensor.hpp>
#include <string>

namespace kiwi::memory {

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
