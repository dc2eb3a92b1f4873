// Report assembly (collector thread only): what a reading becomes in the snapshot. A
// ReportKeeper is one report of the snapshot and what is kept of it from tick to tick: its
// counters, the series it has had stored (the series limit), what was dropped last (the
// invalid-metric notes), and this tick's new report if it has one. A sensor's readings reach it
// from its sample() calls; a report the agent makes itself (its own telemetry, declared with
// MetricSpec rows) is a keeper given its readings the same way, and goes to the store and into the
// snapshot through the same path. SnapshotAssembly builds one tick's snapshot from the keepers.
#pragma once

#include <chrono>
#include <cstdint>
#include <kiwi/model.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/duration.hpp"
#include "collect/series_registry.hpp"
#include "collect/settings.hpp"
#include "plugin/metric_check.hpp"

namespace kiwi::agent {

class ReportKeeper {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;

  ReportKeeper(std::string name, std::string plugin);

  const std::string& name() const { return name_; }
  const std::string& plugin() const { return plugin_; }

  // The labels added to every metric of its readings from now on (a [[sensor]]'s `labels`), in
  // order; a label of the reading with one of their names is kept as "exported_<name>", as
  // Prometheus does with a target's labels.
  void set_labels(Labels labels) { labels_ = std::move(labels); }
  const Labels& labels() const { return labels_; }

  // A reading that arrived in time: this tick's report, stamped `ts_ms`, with its labels. Values
  // `series` refuses (another report's series, a family of the agent's, past the series limit)
  // are dropped and counted; what was refused or dropped by the metric check is noted in the
  // message and logged when that changes; a failure is logged when it starts.
  void read(SampleCall reading, double duration_seconds, std::int64_t ts_ms, SeriesRegistry& series,
            Logger& log);
  // A call past its deadline: this tick's report says so (an error, counted), logged once.
  void time_out(Millis limit, std::int64_t ts_ms, Logger& log);
  // A call that had timed out came back after `took`: its reading is dropped (logged); a failure
  // after this is logged again.
  void came_back(std::chrono::nanoseconds took, Logger& log);

  // This tick's new report (a reading or a time-out), if it has one: SnapshotAssembly::add moves
  // it into the snapshot, and its metrics go to the store.
  bool has_fresh() const { return fresh_.has_value(); }
  const SensorReport& fresh() const { return *fresh_; }

 private:
  friend class SnapshotAssembly;
  std::string name_;
  std::string plugin_;
  SensorState last_state_ = SensorState::ok;
  std::uint64_t errors_total_ = 0;
  std::uint64_t invalid_metrics_total_ = 0;
  std::string last_note_;  // what was refused or dropped last, to log only changes
  Labels labels_;
  std::uint64_t series_refused_total_ = 0;
  // This tick's report, when it has a new one (a reading or a time-out); it moves into the
  // snapshot. Otherwise the snapshot copies the keeper's report from the last one published.
  std::optional<SensorReport> fresh_;
  std::ptrdiff_t published_at_ = -1;  // its index in the last snapshot published; -1: not in it
};

// One tick's snapshot: the header from the settings, then one report per keeper added, in order.
class SnapshotAssembly {
 public:
  // `last_published`: the snapshot of the tick before (null: none), whose reports are carried
  // for keepers with nothing new; `reports`: how many will be added.
  SnapshotAssembly(std::uint64_t sequence, std::int64_t ts_ms, const CollectorSettings& settings,
                   const Snapshot* last_published, std::size_t reports);
  // The keeper's report: its new one moves in (its metrics are appended to `fresh`: they go to
  // the store); without one, it is copied from the last snapshot published; a keeper never read
  // yet says so.
  void add(ReportKeeper& keeper, std::vector<const MetricValue*>& fresh);
  // The snapshot so far: the header and the reports added.
  const Snapshot& so_far() const { return *snap_; }
  std::shared_ptr<Snapshot> finish() { return std::move(snap_); }

 private:
  std::shared_ptr<Snapshot> snap_;
  const Snapshot* last_;
};

}  // namespace kiwi::agent
