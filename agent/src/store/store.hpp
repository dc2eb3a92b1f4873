// History in SQLite (WAL), and its raw ticks in the tick log beside it (`<path>-ticks/`): one
// writer (the collector's thread) and a pool of read-only connections for the HTTP workers, at
// most one per worker thread at a time. The file is opened through
// SQLite's "unix-excl" VFS: connections of this process share it as usual, but the WAL index
// lives in memory instead of a -shm file (which cost a third of the bytes written to flash), and
// other processes cannot open the file while the agent runs ("in use by another process").
//
// This header is the store's interface, and names nothing of SQLite. Behind it, in layers, each
// with its own header, bottom-up:
//   sqlite.hpp        the one door to SQLite: connection, statement, a run of it (RAII)
//   sample_codec.hpp  the bytes of a tick, a block, a deflated row
//   schema.hpp        the file: its tables (the layout, described there), whose file it is,
//                     creation and migration from versions 1-3, quick_check, moving it aside
//   catalog.hpp       the series catalog readers see; series_table.hpp the writer's side of it
//   cursors.hpp       the outputs' cursors
//   alert_log.hpp     the alerts' state and transitions
//   queue.hpp         the ticks not yet committed
//   minute_board.hpp  the minute summaries not in the file yet (the hour in progress)
//   tick_log.hpp      the raw ticks: a file an hour beside the history file, appended to
//   ticks.hpp         reading ticks from the tick log, blocks and older tick rows
//   writer.hpp        append, minute, hour and day summaries (rollup.hpp), the commit, pruning
//                     each tier at its own retention
//   reader.hpp        the read pool, raw reads for the outputs
//   query.hpp         the query planner (query.cpp)
// store.cpp ties them together: opening, recovery of a damaged file, and this interface.
#pragma once

#include <cstdint>
#include <kiwi/model.hpp>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "store/catalog.hpp"

namespace kiwi::agent {

// The file is an SQLite database of another application: refused untouched.
struct ForeignDatabase : StoreError {
  using StoreError::StoreError;
};

class Store {
 public:
  // Opens or creates `path`, identifies it, sets WAL mode, creates or checks the schema, and runs
  // quick_check: before anything is written to a file that open changes (a new one, an older
  // schema taken over), else on a thread of its own beside start-up (it reads every page: ~50 ms
  // for a day of history), whose verdict the writer takes before its first write. A malformed
  // file is moved aside and a new one started (recovery_note()). Throws
  // ForeignDatabase for another application's database, StoreError with the path and SQLite's
  // message otherwise (in use by another process, a newer schema, an unwritable directory).
  explicit Store(std::string path);
  ~Store();

  // Writer side (one thread). Queues one tick, visible to queries at once; no disk I/O.
  void append(std::int64_t ts_ms, const std::vector<const MetricValue*>& metrics);
  // What each tier keeps (unix ms): rows of raw ticks, minute summaries and hour summaries older
  // than these are pruned.
  struct Cutoffs {
    std::int64_t raw = INT64_MIN;
    std::int64_t minutes = INT64_MIN;
    std::int64_t hours = INT64_MIN;
  };
  // Commits the new series (and hour rows, cursors, alerts) in one transaction, then appends the
  // queued ticks to the tick log as one block and syncs it; deletes the tick log's files whose
  // every tick is older than `cutoffs.raw` (what is left before it reads as gone), at most
  // `prune_rows` blocks and as many tick rows of an older agent's file, the minute summaries of
  // whole hours before `cutoffs.minutes` and the hour summaries of whole days before
  // `cutoffs.hours` (a step of each); never the ticks of
  // the hour in progress nor the minute summaries of the day in progress, whatever the cutoffs
  // (the next tier is made from them when it ends, and after a restart). On failure (disk
  // full, I/O error) nothing queued is lost: it stays queued, up to kMaxPendingRows, for the next
  // flush. Throws StoreError. A malformed file is moved aside and the commit retried once on a
  // new one.
  void flush(const Cutoffs& cutoffs, int prune_rows);
  // Every tier cut at `cutoff_ms`.
  void flush(std::int64_t cutoff_ms, int prune_rows) {
    flush(Cutoffs{cutoff_ms, cutoff_ms, cutoff_ms}, prune_rows);
  }
  // The quick_check started at open has finished and found the file damaged: the next flush()
  // moves it aside (the collector flushes at once, so that is within a tick of start-up).
  // Writer thread.
  bool damage_found();
  // Since the store was opened: how many times a malformed file was moved aside, and what was
  // done the last time ("" if never). Any thread.
  std::uint64_t recoveries() const;
  std::string recovery_note() const;
  static constexpr std::uint64_t kMaxRecoveries = 3;
  static constexpr std::int32_t kApplicationId = 0x6b697769;  // "kiwi"
  // Summarises the minute in progress now (at shutdown), so a chart has no hole there. A later
  // append in the same minute (by this store or the next one on this file) folds those samples in
  // again: the minute's summary ends up complete either way.
  void close_current_minute();
  std::size_t pending_rows() const;
  static constexpr std::size_t kMaxPendingRows = 3600;  // an hour at 1 Hz, then the oldest go
  static constexpr std::int64_t kRollupMs = 60'000;
  static constexpr std::int64_t kHourMs = 3'600'000;
  static constexpr std::int64_t kDayMs = 86'400'000;
  static constexpr std::uint32_t kGroupSeries = 64;  // series per rollup row (ids / 64 = group)
  // A query of at most this many series (or a third of them) reads folded hours and days by key.
  static constexpr std::size_t kNarrowSeries = 16;

  // Reader side, any thread. Throws StoreError.
  HistoryResult query(const HistoryQuery& q) const;
  // Metadata of every series ever written (id order): an immutable view (SeriesCatalog),
  // replaced when a series appears, so readers share it without copying or locking.
  using Catalog = std::shared_ptr<const SeriesCatalog>;
  Catalog series() const;

  const std::string& path() const;

  // Raw samples for outputs (remote write): whole ticks with ts > after_ms, oldest first,
  // committed rows and the queued ones, read through a read-only connection; stops before the
  // tick that would take the batch past `max_values` values (one tick at least). Any thread.
  struct RawTick {
    std::int64_t ts_ms;
    std::vector<std::pair<std::uint32_t, double>> values;  // series id (catalog index + 1), value
  };
  // `more` (if given): whether the batch stopped at max_values with ticks left after it.
  std::vector<RawTick> read_raw(std::int64_t after_ms, std::size_t max_values,
                                bool* more = nullptr) const;
  // Ticks stored with ts > after_ms (committed and queued), and the newest tick's ts (INT64_MIN
  // when there is none). Any thread.
  std::pair<std::uint64_t, std::int64_t> ticks_after(std::int64_t after_ms) const;

  // Output cursors: read at open; set() takes effect in memory at once and reaches the file with
  // the next flush(), in its transaction (no write of its own). Any thread.
  std::optional<std::int64_t> cursor(const std::string& output) const;
  void set_cursor(const std::string& output, std::int64_t acked_ms);

  // Alerts (alert_log.hpp): the state of every instance not inactive, as of the last set (read
  // at open), and the log of transitions the notifiers read. Set and logged in memory at once,
  // written with the next flush(); an event is handed out once committed. Any thread.
  std::vector<Alert> alert_states() const;
  void set_alert_states(std::vector<Alert> alerts);
  std::uint64_t log_alert_event(AlertNotice notice);  // returns its sequence number
  std::vector<AlertNotice> alert_events_after(std::uint64_t after, std::size_t max) const;
  std::uint64_t newest_alert_event() const;         // the newest committed (0: none)
  void forget_alert_events(std::uint64_t through);  // every notifier has them

 private:
  class Impl;  // store.cpp
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiwi::agent
