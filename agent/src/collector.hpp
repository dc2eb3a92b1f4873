// The collector: one thread that ticks on a steady clock aligned to the interval, samples the
// sensors that are due, and hands one timestamped sample to the store and the snapshot.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <kiwi/handler.hpp>
#include <mutex>
#include <thread>

#include "plugin_loader.hpp"
#include "snapshot.hpp"
#include "store.hpp"

namespace kiwi::agent {

struct SensorSlot {
  PluginInstance<Sensor> instance;
  std::string name;
  std::string plugin;  // plugin name from its descriptor
  std::int64_t every_ticks = 1;
  // The latest reading; its report moves into the snapshot of its tick (later snapshots copy it
  // from their predecessor until the next reading).
  bool read_this_tick = false;
  bool read_before = false;
  SensorState last_state = SensorState::ok;
  std::uint64_t errors_total = 0;
  std::uint64_t invalid_metrics_total = 0;
  std::string last_invalid_note;  // what was dropped last, to log only changes
  SensorReport report;            // this tick's reading, until it moves into the snapshot
};

struct CollectorSettings {
  Millis interval{1000};
  Millis retention{86'400'000};
  Millis stale_after{3000};
  Millis commit_interval{10000};                // history is committed to disk this often
  const SnapshotFile* snapshot_file = nullptr;  // null: no snapshot file; outlives the collector
  std::string host;
  std::string agent_version;
  double started_at = 0;
  // Called from the collector thread every `heartbeat_every` while it is not stuck in a tick (the
  // systemd watchdog, service_notify.hpp); nothing when empty or 0.
  std::function<void()> heartbeat;
  Millis heartbeat_every{0};
};

struct CollectorStats {
  std::atomic<std::uint64_t> ticks{0};
  std::atomic<std::uint64_t> missed_ticks{0};
  std::atomic<std::uint64_t> store_errors{0};
  std::atomic<std::uint64_t> store_failing_writes{0};   // consecutive, reset by a good write
  std::atomic<std::uint64_t> snapshot_file_errors{0};   // since start
  std::atomic<std::uint64_t> snapshot_file_failing{0};  // consecutive, reset by a good write
};

class Collector {
 public:
  Collector(CollectorSettings settings, std::vector<SensorSlot> sensors, Store& store,
            SnapshotHolder& snapshot, Logger& log);
  ~Collector();

  // Takes one sample now, stamped with the nearest interval boundary (used at start-up so the
  // first request already has data).
  void tick_now();
  // Takes one sample as tick number `tick_index` of the schedule, stamped tick_index x interval (a
  // number not after the last one taken becomes the next one). A sensor with an interval of n
  // ticks is read when the number is a multiple of n, and on its first tick.
  void tick(std::int64_t tick_index);
  // Starts the background thread: ticks at the next interval boundary and on every one after.
  void start();
  // Finishes the tick in progress, then returns. Idempotent.
  void stop();

  const CollectorStats& stats() const { return stats_; }
  std::string store_last_error() const {
    std::lock_guard lock(error_mutex_);
    return store_last_error_;
  }
  std::string snapshot_file_last_error() const {
    std::lock_guard lock(error_mutex_);
    return snapshot_file_last_error_;
  }

 private:
  void run();
  void flush_store(std::int64_t now_ms);
  std::int64_t nearest_tick() const;

  CollectorSettings settings_;
  std::vector<SensorSlot> sensors_;
  Store& store_;
  SnapshotHolder& snapshot_;
  Logger& log_;
  CollectorStats stats_;
  std::uint64_t sequence_ = 0;
  std::int64_t last_index_ = INT64_MIN;  // tick number of the latest sample
  std::int64_t last_flush_ms_ = 0;
  std::int64_t last_prune_ms_ = 0;
  int ticks_since_prune_ = 0;
  mutable std::mutex error_mutex_;
  std::string store_last_error_;
  std::string snapshot_file_last_error_;

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace kiwi::agent
