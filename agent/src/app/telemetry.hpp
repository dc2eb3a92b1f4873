// The agent's own telemetry: how the collector, the store, the reloads, the HTTP server and the
// outputs are doing, as the report kAgentReport ("agent") of every snapshot (collect/
// self_report.hpp). Its rows are MetricSpec rows like a sensor's: /metrics takes its families
// and HELP from them (kiwi_ + the row's name), /api/current and the history its values. A new
// agent metric is one row in telemetry.cpp and one emit, with no change to the C ABI
// (kiwi_stats) or to any handler.
#pragma once

#include <cstdint>
#include <kiwi/io.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "app/agent_data.hpp"
#include "collect/self_report.hpp"

namespace kiwi::agent {

// `write_bytes` of a /proc/<pid>/io text (proc(5)): the bytes the process caused to be sent to
// block devices, page-cache writeback of its files included; nullopt without that line or with
// a value that is not a number.
std::optional<std::uint64_t> parse_io_write_bytes(std::string_view io_text);

class Telemetry final : public SelfReport {
 public:
  // `procfs` is agent.procfs: its self/io holds the agent's own bytes written.
  Telemetry(const AgentData& data, const std::string& procfs);
  // Its rows, published with the plugins as the "agent" plugin (for HELP and /api/plugins).
  static std::span<const MetricSpec> rows();
  std::span<const MetricSpec> metrics() const override { return rows(); }
  SampleResult sample(const Snapshot& tick, MetricSink& sink) override;

 private:
  const AgentData& data_;
  // <procfs>/self/io, opened by the collector's thread on its first read and kept open (a read
  // renders it afresh), so it stays this process's file whatever thread reads it. Unreadable
  // (a kernel without CONFIG_TASK_IO_ACCOUNTING, a /proc that hides it): no series, no error.
  kiwi::KeptFile self_io_;
};

}  // namespace kiwi::agent
