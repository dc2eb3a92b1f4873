// What the collector is given (its settings, its sensors) and what it counts.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "base/duration.hpp"
#include "collect/snapshot.hpp"
#include "config/schema.hpp"
#include "plugin/plugin_loader.hpp"

namespace kiwi::agent {

// One [[sensor]] as the agent hands it over.
struct SensorSpec {
  std::string name;    // unique
  std::string plugin;  // the plugin's descriptor name
  std::int64_t every_ticks = 1;
  Millis timeout{0};  // 0: every_ticks x interval
  // Added to every metric it emits (its [[sensor]]'s `labels`), in order.
  std::vector<std::pair<std::string, std::string>> labels;
  // A new instance to run; an empty one (no object) keeps the running sensor of this name with
  // its instance, state and counters unchanged (only every_ticks/timeout/labels/position are
  // updated).
  PluginInstance<Sensor> instance;
};

// How long one sample() call of a sensor may take: its own `timeout`, else (0) its interval.
inline Millis sensor_timeout(Millis timeout, std::int64_t every_ticks, Millis interval) {
  return timeout.count() > 0 ? timeout : every_ticks * interval;
}

// The configured values default to the host schema's rows (config/schema.hpp), the one place of
// each default.
struct CollectorSettings {
  Millis interval = schema_defaults().collector.interval;
  Millis retention = schema_defaults().collector.retention;  // raw samples
  Millis minute_retention = schema_defaults().collector.minute_retention;
  Millis hour_retention = schema_defaults().collector.hour_retention;
  Millis stale_after = schema_defaults().collector.stale_after;
  Millis commit_interval = schema_defaults().collector.commit_interval;  // history reaches disk
  // Distinct series one sensor may have stored per run; values of further new ones are refused.
  std::size_t max_series_per_sensor =
      static_cast<std::size_t>(schema_defaults().collector.max_series_per_sensor);
  const SnapshotFile* snapshot_file = nullptr;  // null: no snapshot file; outlives the collector
  std::string host;
  std::string agent_version;
  double started_at = 0;
  // Called from the collector thread every `heartbeat_every` while it is not stuck in a tick (the
  // systemd watchdog, service_notify.hpp); nothing when empty or 0.
  std::function<void()> heartbeat;
  Millis heartbeat_every{0};
  // Whose uptime is the clock of the rates derived from counters (agent.procfs); taken by each
  // sensor when it starts.
  std::string procfs = schema_defaults().agent.procfs;
};

struct CollectorStats {
  std::atomic<std::uint64_t> ticks{0};
  std::atomic<std::uint64_t> missed_ticks{0};
  std::atomic<std::uint64_t> store_errors{0};
  std::atomic<std::uint64_t> store_failing_writes{0};   // consecutive, reset by a good write
  std::atomic<std::uint64_t> snapshot_file_errors{0};   // since start
  std::atomic<std::uint64_t> snapshot_file_failing{0};  // consecutive, reset by a good write
};

}  // namespace kiwi::agent
