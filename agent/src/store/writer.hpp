// The write side (one thread, the collector's): the queue of ticks, the minute summaries (rollups)
// and their folding into hour rows, pruning, and the commit: the hour rows (and with them the new
// series), the output cursors and the alerts in one transaction, then the ticks appended to the
// tick log, each record carrying the series not in the file yet. Rollup
// and hour layout: schema.hpp; the minute and hour code is rollup.cpp, the rest writer.cpp.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <kiwi/model.hpp>
#include <string>
#include <utility>
#include <vector>

#include "store/alert_log.hpp"
#include "store/cursors.hpp"
#include "store/minute_board.hpp"
#include "store/queue.hpp"
#include "store/series_table.hpp"
#include "store/sqlite.hpp"
#include "store/store.hpp"
#include "store/tick_log.hpp"
#include "store/ticks.hpp"

namespace kiwi::agent {

// The writer's connection and its statements, prepared at open and closed together.
struct WriterFile {
  sql::Connection db;
  sql::Statement insert_series;
  sql::Statement prune;       // blocks (of a version-5 file) wholly before ?1, at most ?2
  sql::Statement prune_rows;  // tick rows before ?1, at most ?2
  TickStatements ticks;       // begin_minute() reads a minute's ticks with them
  sql::Statement prune_rollups;
  sql::Statement delete_hour;  // hour rows with ?1 <= ts <= ?2
  sql::Statement insert_hour;
  sql::Statement prune_hours;  // hour rows before ?1, at most ?2
  sql::Statement hours_range;  // hour rows with ?1 <= ts <= ?2 (ts, data), oldest first
  sql::Statement insert_day;
  sql::Statement delete_day;  // day rows with ?1 <= ts <= ?2
  sql::Statement prune_days;  // day rows before ?1, at most ?2
  sql::Statement insert_cursor;
};

class Writer {
 public:
  // `open_minute` is the minute summarised in memory now (INT64_MAX: none), for readers: a
  // stored rollup row of that minute is partial (written before a restart), so queries read its
  // samples instead.
  // `board`: the minute summaries not in the file yet, for readers (minute_board.hpp).
  // `log`: where the ticks go (tick_log.hpp).
  Writer(TickQueue& queue, TickLog& log, SeriesTable& series, Cursors& cursors, AlertLog& alerts,
         std::atomic<std::int64_t>& open_minute, MinuteBoard& board)
      : queue_(queue),
        log_(log),
        series_(series),
        cursors_(cursors),
        alerts_(alerts),
        open_minute_(open_minute),
        board_(board) {}

  // The file: `db` (set up by set_up_history()) becomes the writer's; prepare() readies its
  // statements and reads where the rollups stand (StoreError with SQLite's message).
  void attach(sql::Connection db) { file_.db = std::move(db); }
  void prepare();
  sql::Connection& db() { return file_.db; }
  bool is_open() const { return file_.db.is_open(); }
  void close() { file_ = {}; }
  // Series [0, n) are in the file (n = 0: write the whole catalog with the next commit, to a new
  // file after a recovery).
  void set_committed(std::size_t n) { series_committed_ = n; }

  // See Store::append(), Store::close_current_minute().
  void append(std::int64_t ts_ms, const std::vector<const MetricValue*>& metrics);
  void close_current_minute();
  // Store::flush() once, on an open file: StoreError, or Malformed when SQLite finds it so.
  void commit(const Store::Cutoffs& cutoffs, int prune_rows);
  // Writes the series that records carry so far to the file (at close: a file left by a clean
  // exit has its whole catalog). StoreError.
  void commit_series();

  // The most bytes of catalog rows a record carries: past it, the commit writes them to SQLite.
  static constexpr std::size_t kMaxCarriedBytes = 4096;

 private:
  // writer.cpp
  void write_ticks(const std::vector<TickQueue::Row>& rows, const std::string& carry);
  void insert_series(const SeriesCatalog& catalog);  // [series_committed_, size) (StoreError)
  void write_hours();
  int prune(const Store::Cutoffs& cutoffs, int max_rows);
  // Runs the writer's statement `st` (?1 = a, ?2 = b) that returns no rows; StoreError `what`.
  void step_range(sql::Statement& st, std::int64_t a, std::int64_t b, const char* what);
  [[noreturn]] void fail(const std::string& what) const;

  // rollup.cpp
  void open_hour(std::int64_t hour, std::int64_t minute);
  void begin_minute(std::int64_t minute);
  void close_minute();
  void publish();
  using TickFn =
      std::function<void(std::int64_t, const std::vector<std::pair<std::uint32_t, double>>&)>;
  void each_tick(std::int64_t from, std::int64_t to, const TickFn& fn);
  // The minute summaries of the ticks in [from, to] in the file and the queue.
  std::vector<MinuteRows> summarise(std::int64_t from, std::int64_t to);
  // Inside commit()'s transaction (StoreError): an hour's rows from its minutes, a day's rows
  // from its hour rows.
  void fold_hour(std::int64_t hour, const std::vector<MinuteRows>& minutes);
  void fold_day(std::int64_t day);

  TickQueue& queue_;
  TickLog& log_;
  SeriesTable& series_;
  Cursors& cursors_;
  AlertLog& alerts_;
  std::atomic<std::int64_t>& open_minute_;
  MinuteBoard& board_;
  WriterFile file_;
  std::size_t series_committed_ = 0;  // series [0, series_committed_) are in the file

  // The hour in progress (INT64_MIN: none yet) and its closed minutes; hours closed since the
  // last commit, which writes their hour rows; and the first hour of the file that may have
  // ticks but no hour rows (an hour the agent left unfolded when it stopped; INT64_MIN: any;
  // INT64_MAX: none), folded from its ticks when the first minute begins.
  std::int64_t hour_ = INT64_MIN;
  std::vector<MinuteRows> hour_minutes_;
  std::vector<std::pair<std::int64_t, std::vector<MinuteRows>>> closed_hours_;
  std::int64_t recover_from_ = INT64_MAX;
  // Days that have minute summaries (hour rows) but no hour summaries yet, in a file an agent
  // before them wrote: folded by the next commit (their newest day is folded when the day ends).
  std::vector<std::int64_t> unfolded_days_;

  // A minute being summarised: series id -> running summary.
  struct MinuteFold {
    struct Stats {
      double sum = 0, min = 0, max = 0, last = 0;
      std::uint32_t n = 0;
    };
    std::int64_t start = INT64_MIN;
    std::int64_t first = INT64_MAX;  // ts of the minute's first sample
    std::vector<Stats> stats;        // index = series id
    void add(std::int64_t ts_ms, const std::vector<std::pair<std::uint32_t, double>>& values);
    bool empty() const { return first == INT64_MAX; }
    MinuteRows rows() const;  // the summary (rollup.hpp)
    void reset(std::int64_t minute);
  };
  MinuteFold minute_;
};

}  // namespace kiwi::agent
