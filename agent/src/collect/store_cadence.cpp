#include "collect/store_cadence.hpp"

#include <malloc.h>

#include <algorithm>

#include "store/store.hpp"

namespace kiwi::agent {

namespace {

// How many retention-expired rows one tick may delete: small steps keep each tick short, and
// are still far faster than one new row per tick, so a backlog drains.
constexpr int kPruneRowsPerTick = 32;
// Pruning rewrites the oldest pages and the free list, so it costs flash writes per commit no
// matter how few rows go; once a minute, in one bigger step, halves the steady-state writes.
constexpr std::int64_t kPruneEveryMs = 60'000;
constexpr std::int64_t kTrimEveryMs = 10'000;

}  // namespace

StoreCadence::StoreCadence(Store& store, Logger& log, CollectorStats& stats)
    : store_(store), log_(log), stats_(stats) {
  log_recovery();  // the file the store replaced when it opened, if it did
}

void StoreCadence::append(std::int64_t ts_ms, const std::vector<const MetricValue*>& values,
                          const CollectorSettings& settings) {
  store_.append(ts_ms, values);
  ++ticks_since_prune_;
  if (last_flush_ms_ == 0) last_flush_ms_ = ts_ms;
  // The store's check of the file it opened found damage: flush now, which moves the file aside,
  // rather than serving from it until the next commit.
  if (ts_ms - last_flush_ms_ >= settings.commit_interval.count() || store_.damage_found())
    flush(ts_ms, settings);
  // Every 10 s, hand freed heap back to the kernel: connection buffers of a burst of clients,
  // query results, SQLite pages. glibc returns only the top of each heap by itself, so without
  // this RSS keeps the high-water mark of the busiest minute. (It went with each commit; a
  // commit is now a minute apart, and an attack's buffers stayed that long: tools/faults.sh rss.)
  if (ts_ms - last_trim_ms_ >= kTrimEveryMs) {
    last_trim_ms_ = ts_ms;
    ::malloc_trim(0);
  }
}

// A damaged history file moved aside and replaced (at open or by a commit): logged once each.
void StoreCadence::log_recovery() {
  const std::uint64_t n = store_.recoveries();
  if (n == recoveries_logged_) return;
  recoveries_logged_ = n;
  log_.error("history store: " + store_.recovery_note());
}

bool StoreCadence::flush(std::int64_t now_ms, const CollectorSettings& settings) {
  last_flush_ms_ = now_ms;
  bool ok = true;
  try {
    // Small prune steps, in proportion to the ticks flushed: a backlog drains, no flush is long.
    const bool prune = now_ms - last_prune_ms_ >= kPruneEveryMs;
    const Store::Cutoffs cutoffs{now_ms - settings.retention.count(),
                                 now_ms - settings.minute_retention.count(),
                                 now_ms - settings.hour_retention.count()};
    store_.flush(cutoffs, prune ? kPruneRowsPerTick * std::max(1, ticks_since_prune_) : 0);
    if (prune) {
      last_prune_ms_ = now_ms;
      ticks_since_prune_ = 0;
    }
    if (stats_.store_failing_writes.exchange(0) != 0) log_.info("history store: writing again");
  } catch (const std::exception& e) {
    ok = false;
    ++stats_.store_failing_writes;
    {
      std::lock_guard lock(error_mutex_);
      last_error_ = e.what();
    }
    // Logged when it starts failing and once in a while after, not at every attempt.
    if (stats_.store_errors++ % 12 == 0)
      log_.error(std::string("history store: ") + e.what() + " (" +
                 std::to_string(stats_.store_errors.load()) + " failed writes so far; " +
                 std::to_string(store_.pending_rows()) + " samples kept in memory)");
  }
  log_recovery();
  return ok;
}

void StoreCadence::finish(std::int64_t now_ms, const CollectorSettings& settings,
                          Millis retry_after, Clock& clock) {
  store_.close_current_minute();
  // What is queued reaches the disk before the process exits (pruning as of the latest sample).
  // A store that is failing (a full disk) gets one more try a moment later; what it still
  // refuses is lost with the process, and the log says how much.
  if (flush(now_ms, settings)) return;
  clock.sleep_for(retry_after);
  if (flush(now_ms, settings)) return;
  log_.error("history store: " + std::to_string(store_.pending_rows()) +
             " samples not written at exit (lost): " + last_error());
}

std::string StoreCadence::last_error() const {
  std::lock_guard lock(error_mutex_);
  return last_error_;
}

}  // namespace kiwi::agent
