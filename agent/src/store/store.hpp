// History in SQLite (WAL): one writer (the collector's thread) and a pool of read-only connections
// for the HTTP workers, at most one per worker thread at a time. The file is opened through
// SQLite's "unix-excl" VFS: connections of this process share it as usual, but the WAL index
// lives in memory instead of a -shm file (which cost a third of the bytes written to flash), and
// other processes cannot open the file while the agent runs ("in use by another process").
//
// Schema (PRAGMA application_id = kApplicationId, PRAGMA user_version = 4; a file of version 1
// to 3 is taken over, its rows still read):
//   series(id INTEGER PRIMARY KEY, name, labels, unit, kind, UNIQUE(name, labels))
//   blocks(ts INTEGER PRIMARY KEY   -- unix milliseconds of the block's first tick
//          , last INTEGER           -- of its last tick (last - ts < kMaxBlockSpanMs)
//          , ticks INTEGER          -- how many ticks it holds
//          , data BLOB)             -- the ticks, each with every value (sample_codec), deflated
//   samples(ts INTEGER PRIMARY KEY, data BLOB)  -- a tick per row: what agents before version 3
//                                   -- wrote; read (and pruned) as long as such rows last
//   rollups(ts INTEGER PRIMARY KEY  -- start of a minute + group (series id / kGroupSeries), ms
//           , data BLOB)            -- per series of the group: mean, min, max, last and count of
//                                   -- that minute; group 0 also (key 0) the offset of its first
//                                   -- sample in ms, so it is there for every minute summarised;
//                                   -- deflated when that is smaller. A version 1-3 file's rows
//                                   -- hold every series at ts = minute: they read as group 0
//   hours(ts INTEGER PRIMARY KEY    -- start of an hour + series id
//           , data BLOB)            -- that series' minute rows of the hour (minute * 5 + k);
//                                   -- id 0: the hour's minute map (minute -> first-sample offset)
//   output_cursors(name TEXT PRIMARY KEY  -- [[remote_write]] name
//           , acked_ms INTEGER)     -- newest sample ts the receiver acknowledged
//   (created if missing in a file of any version: older agents ignore it)
// Queries with a step of a minute or more read the rollups: a 24 h chart reads 1,440 minutes, not
// 86,400 ticks. Their buckets are made of whole minutes (raw samples fill the rest of the window).
// A minute's summary always folds every sample of that minute, also across a restart inside it
// (begin_minute()). Hour rows are a second copy of the minute rows, made from them alone
// (fold_hour()) when a minute of another hour is written, in that commit; writing a minute
// deletes its hour's rows first (a rewrite after a restart, a clock gone back), so the two never
// disagree. A query of at most kNarrowSeries series reads hours that have hour rows from those
// (a row per series, and the minute map) and other minutes by key (group 0 and the wanted
// groups): a day of one series is ~24 + 2 x 60 lookups whatever the number of series. Wider
// queries read every minute row, as before. An hour of a version-3 file's whole-minute rows is
// not folded (it ages out in a day).
// Flash wear sets the layout. append() keeps ticks in memory and flush() commits them every few
// seconds (a crash loses at most that; queries see the queued ticks too) as one block row: the
// ticks of a commit compress together about 3.4-fold (each repeats the series ids and most
// values of the one before), so a commit of 10 s at the default sensors is one row of ~0.8 kB
// that fits one 1 KiB page, where a row per tick took four pages and their parent. Each page a
// commit touches is a WAL frame, and a checkpoint writes it again: bytes written per hour follow
// pages touched per commit (docs/benchmarks.md, "Disk writes").
// Whose file it is, and a damaged one. Before anything is written, the file is identified: ours
// (our application_id, or an agent before it set one: user_version 1 or 2 and only our tables),
// new (empty), or foreign, which is refused (ForeignDatabase) and left byte-identical. A file
// SQLite finds malformed (SQLITE_CORRUPT or SQLITE_NOTADB at open, at the quick_check run on
// open, or at a commit) is moved aside with its -wal and -shm as `<path>.corrupt-<UTC time>` and
// a new file started in its place: the series catalog and the queue are kept (the next commit
// writes them to the new file), only the rows in the damaged file are gone from the history.
// recovery_note() says so until the process ends; at most kMaxRecoveries times per run, then
// commits fail (and are reported) as before, so a dying disk is not filled with copies.
#pragma once

#include <array>
#include <atomic>
#include <future>
#include <kiwi/model.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "store/sample_codec.hpp"
#include "store/sqlite.hpp"

namespace kiwi::agent {

// "core=\"0\",mode=\"user\"" (Prometheus escaping), the canonical label text of a series.
std::string canonical_labels(const std::vector<std::pair<std::string, std::string>>& labels);
void append_canonical_labels(std::string& out,
                             const std::vector<std::pair<std::string, std::string>>& labels);

// The statements that read ticks from both places they are kept, prepared on one connection:
// blocks, and the tick rows of a version-2 file (read until pruned). scan_ticks() in store.cpp
// runs them.
struct TickStatements {
  sql::Statement blocks_up;          // ?1 <= ts <= ?2 and last >= ?3: ts, data; oldest first
  sql::Statement blocks_down;        // the same, newest first
  sql::Statement rows_up;            // samples with ?1 <= ts <= ?2: ts, data; oldest first
  sql::Statement rows_down;          // the same, newest first
  int prepare(sql::Connection& db);  // an SQLite result code
};

// A read-only connection (SQLITE_OPEN_READONLY): any write through it fails.
class ReadConnection {
 public:
  explicit ReadConnection(const std::string& path);  // throws StoreError
  ReadConnection(const ReadConnection&) = delete;
  ReadConnection& operator=(const ReadConnection&) = delete;
  sql::Connection& db() { return db_; }
  std::uint64_t generation = 0;  // the store's pool generation it was opened in
  TickStatements& ticks() { return ticks_; }
  sql::Statement& rollups() { return rollups_; }  // ?1 since ?2 until, oldest first
  // The first rollup row with ?1 <= ts <= ?2 (ts, data), and the row at ts = ?1 (data).
  sql::Statement& rollup_next() { return rollup_next_; }
  sql::Statement& rollup_at() { return rollup_at_; }
  sql::Statement& hour_at() { return hour_at_; }  // the hour row at ts = ?1 (data)
  // One row: the oldest tick row ts, the oldest block ts, the oldest rollup ts (each NULL if none).
  sql::Statement& bounds() { return bounds_; }
  // One row, of what has ts > ?1: ticks in blocks, the newest block's last tick, tick rows, the
  // newest tick row (NULL if none).
  sql::Statement& count_after() { return count_after_; }

 private:
  sql::Connection db_;
  TickStatements ticks_;
  sql::Statement rollups_;
  sql::Statement rollup_next_;
  sql::Statement rollup_at_;
  sql::Statement hour_at_;
  sql::Statement bounds_;
  sql::Statement count_after_;
};

struct SeriesInfo {
  std::string key;
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;
  std::string unit;
  MetricKind kind = MetricKind::gauge;
};

// Metadata of every series, in id order (id = index + 1), as one reader sees it: an immutable
// view of an append-only table. The table is stored in fixed chunks that never move: the writer
// fills the slots past every published size, and publishing a new series makes a new view (a
// size and the chunk list) without copying any series, so adding N series costs O(N) in all
// (a copy of the whole catalog per new series made start-up quadratic: 86 s to first answer with
// 40,000 series). Readers only read slots below their view's size; the writer writes a slot
// before it publishes the view that includes it (under Store::series_mutex_), so nobody reads a
// slot while it is written.
class SeriesCatalog {
 public:
  static constexpr std::size_t kChunk = 256;
  using Chunk = std::array<SeriesInfo, kChunk>;
  using Chunks = std::vector<std::shared_ptr<Chunk>>;

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const SeriesInfo& operator[](std::size_t i) const {
    return (*(*chunks_)[i / kChunk])[i % kChunk];
  }

  class iterator {
   public:
    iterator(const SeriesCatalog* c, std::size_t i) : c_(c), i_(i) {}
    const SeriesInfo& operator*() const { return (*c_)[i_]; }
    const SeriesInfo* operator->() const { return &(*c_)[i_]; }
    iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator==(const iterator& o) const { return i_ == o.i_; }

   private:
    const SeriesCatalog* c_;
    std::size_t i_;
  };
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, size_}; }

  SeriesCatalog() = default;
  SeriesCatalog(std::shared_ptr<const Chunks> chunks, std::size_t size)
      : chunks_(std::move(chunks)), size_(size) {}

 private:
  std::shared_ptr<const Chunks> chunks_ = std::make_shared<const Chunks>();
  std::size_t size_ = 0;
};

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
  // Commits the queued ticks (as one block; and new series) in one transaction, then deletes at
  // most `prune_rows` blocks whose every tick is older than `cutoff_ms` (and as many tick rows of
  // an older agent's file). On failure (disk full, I/O error) nothing queued
  // is lost: it stays queued, up to kMaxPendingRows, for the next flush. Throws StoreError.
  // A malformed file is moved aside and the commit retried once on a new one.
  void flush(std::int64_t cutoff_ms, int prune_rows);
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
  static constexpr std::uint32_t kGroupSeries = 64;  // series per rollup row (ids / 64 = group)
  // A query of at most this many series reads closed hours from the per-series hour rows.
  static constexpr std::size_t kNarrowSeries = 16;

  // Reader side, any thread. Throws StoreError.
  HistoryResult query(const HistoryQuery& q) const;
  // Metadata of every series ever written (id order): an immutable view (SeriesCatalog),
  // replaced when a series appears, so readers share it without copying or locking.
  using Catalog = std::shared_ptr<const SeriesCatalog>;
  Catalog series() const;

  const std::string& path() const { return path_; }

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

 private:
  // The id of m's series (added to the catalogue if new). `position` is m's index in this tick's
  // list: the series at that index last tick is tried first (see recent_ids_).
  std::uint32_t series_id(const MetricValue& m, std::size_t position);
  std::uint32_t add_series(SeriesInfo s);  // appends to the writer's table, returns its id
  void publish_series();                   // makes the writer's table the readers' catalog
  void forget_series();
  void open_file();   // opens path_ as the writer: identify, check, set up (StoreError)
  void close_file();  // closes the writer's connection and statements (file_ = {})
  void recover(const std::string& why);  // moves path_ aside, opens a new file (StoreError)
  void commit(std::int64_t cutoff_ms, int prune_rows);  // flush() once (StoreError)
  // The verdict of the quick_check started at open ("ok" or what it found), once it is in
  // (waiting for it with `wait`); nullopt while it runs or when none was started. Writer thread.
  std::optional<std::string> check_verdict(bool wait);
  HistoryResult query_window(const HistoryQuery& q, std::int64_t since_ms, std::int64_t until_ms,
                             std::int64_t step_ms) const;
  int prune(std::int64_t cutoff_ms, int max_rows);
  std::unique_ptr<ReadConnection> borrow() const;
  void give_back(std::unique_ptr<ReadConnection> conn) const;
  [[noreturn]] void fail(const std::string& what) const;

  std::string path_;
  // The writer's connection and its statements, prepared at open and closed together.
  struct WriterFile {
    sql::Connection db;
    sql::Statement insert_block;
    sql::Statement insert_series;
    sql::Statement prune;       // blocks wholly before ?1, at most ?2
    sql::Statement prune_rows;  // tick rows before ?1, at most ?2
    TickStatements ticks;       // begin_minute() reads a minute's ticks with them
    sql::Statement insert_rollup;
    sql::Statement prune_rollups;
    sql::Statement delete_minute;  // rollup rows with ?1 <= ts <= ?2
    sql::Statement delete_hour;    // hour rows with ?1 <= ts <= ?2
    sql::Statement insert_hour;
    sql::Statement prune_hours;  // hour rows before ?1, at most ?2
    sql::Statement oldest_hour;  // the first hour row's ts
    sql::Statement rollup_next;  // as ReadConnection's, on the writer
    sql::Statement rollup_at;
    sql::Statement insert_cursor;
  };
  WriterFile file_;

  // Ticks not yet committed, oldest first; read by workers (merged into query results).
  mutable std::mutex pending_mutex_;
  std::vector<std::pair<std::int64_t, std::string>> pending_;
  // Closed minutes not yet committed (writer thread only): one blob per group (empty: none).
  struct PendingMinute {
    std::int64_t minute;
    std::vector<std::string> groups;
  };
  std::vector<PendingMinute> pending_rollups_;
  // The hour of the newest minute row written (INT64_MIN: none): when a minute of another hour
  // is written, this one is folded into hour rows (fold_hour()).
  std::int64_t rollup_hour_ = INT64_MIN;
  void fold_hour(std::int64_t hour);  // inside commit()'s transaction (StoreError)
  // Runs the writer's statement `st` (?1 = a, ?2 = b) that returns no rows; StoreError `what`.
  void step_range(sql::Statement& st, std::int64_t a, std::int64_t b, const char* what);

  // The minute being summarised (writer thread only): series id -> running summary.
  struct MinuteStats {
    double sum = 0, min = 0, max = 0, last = 0;
    std::uint32_t n = 0;
  };
  std::int64_t minute_start_ = INT64_MIN;
  std::int64_t minute_first_ = INT64_MAX;  // ts of the minute's first sample
  std::vector<MinuteStats> minute_;        // index = series id
  // The minute summarised in memory now (INT64_MAX: none), for readers: a stored rollup row of
  // that minute is partial (written before a restart), so queries read its samples instead.
  std::atomic<std::int64_t> open_minute_{INT64_MAX};
  void begin_minute(std::int64_t minute);
  void add_to_minute(std::int64_t ts_ms,
                     const std::vector<std::pair<std::uint32_t, double>>& values);
  void close_minute();
  std::size_t series_committed_ = 0;  // series_[0, series_committed_) are in the file

  // Series catalog: written by the writer, read by every worker (series_mutex_ guards the
  // pointer only). Thread safety (the TSan report of issue 16 pairing series_id() with
  // series()): every read and write of series_ takes series_mutex_; a view is immutable once
  // published, and the one thing the writer changes after that, a chunk slot, lies past the size
  // of every view published so far, and is written before the view that includes it is published
  // under that same mutex (happens-before for every reader that gets the view). Views die on
  // whichever thread drops the last shared_ptr, through its atomic count. So no two threads touch
  // one object unordered; a report here is the libstdc++ 12 shared_ptr / atomic<shared_ptr>
  // false positive (google/sanitizers#1558), which the TSan run suppresses by that name only. The
  // writer's table (chunks_, series_count_), series_ids_ and the two buffers belong to the writer
  // thread.
  mutable std::mutex series_mutex_;
  Catalog series_ = std::make_shared<const SeriesCatalog>();  // index = id - 1
  std::shared_ptr<SeriesCatalog::Chunks> chunks_ = std::make_shared<SeriesCatalog::Chunks>();
  std::size_t series_count_ = 0;
  std::unordered_map<std::string, std::uint32_t> series_ids_;  // key -> id
  // series_id()'s label text and lookup key, reused: no allocation per metric per tick.
  std::string labels_buf_, key_buf_;
  // The ids of the last tick's series, by position. Sensors emit in the same order every tick,
  // so the series at a position is nearly always the one there last tick: comparing its name and
  // labels spares building and hashing the key (most of append()'s cost). 0: none.
  std::vector<std::uint32_t> recent_ids_;

  mutable std::mutex cursor_mutex_;
  std::map<std::string, std::int64_t> cursors_;
  std::map<std::string, std::int64_t> cursors_dirty_;  // set since the last flush

  // Read-only connections not in use; a worker takes one, returns it after its query. A
  // recovery bumps the generation: connections to the file moved aside are closed on return.
  mutable std::mutex pool_mutex_;
  mutable std::vector<std::unique_ptr<ReadConnection>> pool_;
  std::uint64_t pool_generation_ = 0;  // guarded by pool_mutex_

  // quick_check of the file opened, on a thread of its own (see the constructor); the writer's.
  std::future<std::string> check_;
  std::optional<std::string> verdict_;

  mutable std::mutex recovery_mutex_;
  std::uint64_t recoveries_ = 0;
  std::string recovery_note_;
};

}  // namespace kiwi::agent
