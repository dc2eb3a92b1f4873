// The agent's own report (its telemetry): one more report of every snapshot, named and plugged
// kAgentReport ("agent"), added after the sensors'. It is declared with MetricSpec rows and emitted
// through a MetricSink as a sensor's is, and the collector checks and keeps it as it does a
// sensor's (plugin/metric_check.hpp, report.hpp), so the snapshot, the history and /metrics take
// it by the same path. app/telemetry.hpp makes it; a new agent metric is a row and an emit there.
#pragma once

#include <kiwi/model.hpp>
#include <kiwi/sensor.hpp>
#include <span>

namespace kiwi::agent {

class SelfReport {
 public:
  virtual ~SelfReport() = default;
  // Its MetricSpec rows: their families are reserved to it (series_registry.hpp).
  virtual std::span<const MetricSpec> metrics() const = 0;
  // This tick's reading, on the collector thread: `tick` is the snapshot being assembled, its
  // header and the sensors' reports of the tick. Must not block.
  virtual SampleResult sample(const Snapshot& tick, MetricSink& sink) = 0;
};

}  // namespace kiwi::agent
