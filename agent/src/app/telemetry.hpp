// The agent's own telemetry: how the collector, the store, the reloads, the HTTP server and the
// outputs are doing, as the report kAgentReport ("agent") of every snapshot (collect/
// self_report.hpp). Its rows are MetricSpec rows like a sensor's: /metrics takes its families
// and HELP from them (kiwi_ + the row's name), /api/current and the history its values. A new
// agent metric is one row in telemetry.cpp and one emit, with no change to the C ABI
// (kiwi_stats) or to any handler.
#pragma once

#include <span>

#include "app/agent_data.hpp"
#include "collect/self_report.hpp"

namespace kiwi::agent {

class Telemetry final : public SelfReport {
 public:
  explicit Telemetry(const AgentData& data) : data_(data) {}
  // Its rows, published with the plugins as the "agent" plugin (for HELP and /api/plugins).
  static std::span<const MetricSpec> rows();
  std::span<const MetricSpec> metrics() const override { return rows(); }
  SampleResult sample(const Snapshot& tick, MetricSink& sink) override;

 private:
  const AgentData& data_;
};

}  // namespace kiwi::agent
