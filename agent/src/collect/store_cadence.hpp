// The store's side of the ticks (collector thread only): each tick's readings appended, a commit
// every commit_interval (at once when the store's check of its file found damage), pruning once
// a minute in steps, the heap handed back to the kernel after each commit, a replaced file logged
// once, and at stop a last commit, tried twice.
#pragma once

#include <cstdint>
#include <kiwi/model.hpp>
#include <mutex>
#include <string>
#include <vector>

#include "base/clock.hpp"
#include "collect/settings.hpp"

namespace kiwi::agent {

class Store;

class StoreCadence {
 public:
  // Counts failed writes in `stats` (store_errors, store_failing_writes); logs a file the store
  // replaced when it opened, if it did.
  StoreCadence(Store& store, Logger& log, CollectorStats& stats);

  // Appends the readings of the tick stamped `ts_ms`, and commits when one is due.
  void append(std::int64_t ts_ms, const std::vector<const MetricValue*>& values,
              const CollectorSettings& settings);
  // Commits what is queued, pruning each tier's rows older than its retention in `settings` when
  // a minute has passed; false: the store failed (logged, counted).
  bool flush(std::int64_t now_ms, const CollectorSettings& settings);
  // At stop: closes the current minute and commits what is queued; a failed commit is tried again
  // `retry_after` later (on `clock`), then what is lost is logged.
  void finish(std::int64_t now_ms, const CollectorSettings& settings, Millis retry_after,
              Clock& clock);
  // The latest failure's message (any thread).
  std::string last_error() const;

 private:
  void log_recovery();

  Store& store_;
  Logger& log_;
  CollectorStats& stats_;
  std::int64_t last_flush_ms_ = 0;
  std::int64_t last_trim_ms_ = 0;        // malloc_trim()
  std::uint64_t recoveries_logged_ = 0;  // store_.recoveries() already logged
  std::int64_t last_prune_ms_ = 0;
  int ticks_since_prune_ = 0;
  mutable std::mutex error_mutex_;
  std::string last_error_;
};

}  // namespace kiwi::agent
