#include "store/store.hpp"

#include <sys/resource.h>
#include <unistd.h>
#include <kiwi/glob.hpp>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <system_error>

#include "base/compress.hpp"
#include "base/files.hpp"

namespace kiwi::agent {

namespace {
// Page cache per connection: 32 pages of 1 KiB. SQLite's default (2 MB) let each connection's
// cache grow with the file, so RSS crept up for hours (about 50 KiB a minute under a history
// load); with 64 pages it still grew for the first minutes (15 KiB a minute while the file grew,
// docs/benchmarks.md). SQLite allocates 20 pages up front, so 32 is a plateau reached early. The
// writer touches a few pages per commit (the right edge of each table, the pruned left edge);
// queries read the rest from the kernel's page cache (a 120-sample query, about 40 pages, runs
// once per sample: later requests get the cached body).
constexpr const char* kCacheSizePragma = "PRAGMA cache_size=-32";

// 2: sample blobs in sample_codec format 2. A version-1 file is taken over as it is (its rows
// stay in format 1, which decode() still reads) and marked 2, so an older agent refuses it
// instead of misreading the new rows.
// 3: ticks in blocks (a row per commit), rollups deflated. A file of version 1 or 2 gets the
// blocks table and is marked 3; its tick rows are read until retention prunes them.
// 4: rollup rows of at most 64 series each, keyed minute + group (group = series id / 64; group 0
// holds the first-sample offset), and per-series hour rows (table hours) folded from them when the
// hour is over. A file of version 1-3 gets the hours table and is marked 4; its whole-minute rows
// are read as group 0 (keyed minute + 0) until retention prunes them.
constexpr int kSchemaVersion = 4;

// "unix-excl" is the default unix VFS, except that the first connection of this process takes an
// exclusive lock on the file for the whole process: the writer and the workers' read-only
// connections share it, and SQLite then keeps the WAL index in heap memory instead of the
// memory-mapped -shm file. Every commit dirtied five of that file's 4 KiB pages (index header
// and hash table), so the kernel wrote them back after each 30 s dirty expiry: 1.8 of 6 MB/h at
// steady state, plus the inode updates. The cost: no other process can read the file while the
// agent has it open. nullptr (the default VFS) if this SQLite lacks it.
const char* history_vfs() {
  static const char* const name = sql::has_vfs("unix-excl") ? "unix-excl" : nullptr;
  return name;
}

void append_escaped_label(std::string& out, std::string_view v) {
  for (char c : v) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
}

// Inverse of canonical_labels, for series read back from the database.
std::vector<std::pair<std::string, std::string>> parse_labels(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!text.empty()) {
    auto eq = text.find("=\"");
    if (eq == std::string_view::npos) break;
    std::string name(text.substr(0, eq)), value;
    std::size_t i = eq + 2;
    for (; i < text.size() && text[i] != '"'; ++i) {
      if (text[i] == '\\' && i + 1 < text.size()) {
        ++i;
        value.push_back(text[i] == 'n' ? '\n' : text[i]);
      } else {
        value.push_back(text[i]);
      }
    }
    out.emplace_back(std::move(name), std::move(value));
    text.remove_prefix(std::min(text.size(), i + 2));  // past `",`
  }
  return out;
}

// The multiple of `step` at or before `t` (also for negative t).
std::int64_t floor_to(std::int64_t t, std::int64_t step) {
  return t - ((t % step) + step) % step;
}

// t - d (d >= 0), or INT64_MIN where that would go below it: the start of a lookback from a
// window that may begin in the far past.
std::int64_t minus_saturating(std::int64_t t, std::int64_t d) {
  return t < INT64_MIN + d ? INT64_MIN : t - d;
}

// A series' key: `name`, or `name{labels}` with its canonical label text. Written into `out`, so
// the per-tick lookup reuses one buffer.
void assign_key(std::string& out, std::string_view name, std::string_view labels) {
  out.assign(name);
  if (labels.empty()) return;
  out.push_back('{');
  out.append(labels);
  out.push_back('}');
}
}  // namespace

void append_canonical_labels(std::string& out,
                             const std::vector<std::pair<std::string, std::string>>& labels) {
  bool first = true;
  for (auto& [k, v] : labels) {
    if (!first) out.push_back(',');
    first = false;
    out += k;
    out += "=\"";
    append_escaped_label(out, v);
    out.push_back('"');
  }
}

std::string canonical_labels(const std::vector<std::pair<std::string, std::string>>& labels) {
  std::string out;
  append_canonical_labels(out, labels);
  return out;
}

int TickStatements::prepare(sql::Connection& db) {
  static constexpr const char* kSql[] = {
      "SELECT ts, data FROM blocks WHERE ts BETWEEN ?1 AND ?2 AND last >= ?3 ORDER BY ts",
      "SELECT ts, data FROM blocks WHERE ts BETWEEN ?1 AND ?2 AND last >= ?3 ORDER BY ts DESC",
      "SELECT ts, data FROM samples WHERE ts BETWEEN ?1 AND ?2 ORDER BY ts",
      "SELECT ts, data FROM samples WHERE ts BETWEEN ?1 AND ?2 ORDER BY ts DESC"};
  sql::Statement* out[] = {&blocks_up, &blocks_down, &rows_up, &rows_down};
  for (int i = 0; i < 4; ++i)
    if (int rc = out[i]->prepare(db, kSql[i]); rc != sql::kOk) return rc;
  return sql::kOk;
}

ReadConnection::ReadConnection(const std::string& path) {
  int rc = db_.open(path, sql::Access::read_only, history_vfs());
  if (rc == sql::kOk) {
    db_.busy_timeout(1000);
    rc = db_.try_exec(kCacheSizePragma);
  }
  if (rc == sql::kOk) rc = ticks_.prepare(db_);
  if (rc == sql::kOk)
    rc = rollups_.prepare(db_,
                          "SELECT ts, data FROM rollups WHERE ts BETWEEN ?1 AND ?2 ORDER BY ts");
  if (rc == sql::kOk)
    rc = rollup_next_.prepare(db_,
                              "SELECT ts, data FROM rollups WHERE ts BETWEEN ?1 AND ?2 ORDER BY ts "
                              "LIMIT 1");
  if (rc == sql::kOk) rc = rollup_at_.prepare(db_, "SELECT data FROM rollups WHERE ts = ?1");
  if (rc == sql::kOk) rc = hour_at_.prepare(db_, "SELECT data FROM hours WHERE ts = ?1");
  if (rc == sql::kOk)
    rc = bounds_.prepare(db_,
                         "SELECT (SELECT ts FROM samples ORDER BY ts LIMIT 1), "
                         "(SELECT ts FROM blocks ORDER BY ts LIMIT 1), "
                         "(SELECT ts FROM rollups ORDER BY ts LIMIT 1)");
  if (rc == sql::kOk)
    rc = count_after_.prepare(db_,
                              "SELECT (SELECT coalesce(sum(ticks), 0) FROM blocks WHERE ts > ?1), "
                              "(SELECT max(last) FROM blocks WHERE ts > ?1), "
                              "(SELECT count(*) FROM samples WHERE ts > ?1), "
                              "(SELECT max(ts) FROM samples WHERE ts > ?1)");
  if (rc != sql::kOk) throw StoreError(path + ": " + db_.message());
}

namespace {
// Calls fn(ts, blob) for every tick stored with from <= ts <= to, oldest first (newest first when
// `newest_first`), each ts once, until fn returns false: the tick rows of an older agent, then the
// blocks (ticks only ever go forward in time, so the rows are older), or the other way round.
// Blobs are views valid until fn returns. A block that does not unpack reads as missing, as a
// damaged tick row did. The same ts twice (two blocks overlap when the wall clock went back
// between two runs) is read once, the first met. Throws StoreError with SQLite's message.
template <class Fn>
void scan_ticks(const sql::Connection& db, TickStatements& t, std::int64_t from, std::int64_t to,
                bool newest_first, Fn&& fn) {
  if (from > to) return;
  std::int64_t seen = newest_first ? INT64_MAX : INT64_MIN;
  bool go = true;
  auto emit = [&](std::int64_t ts, std::string_view blob) {
    if (ts < from || ts > to || (newest_first ? ts >= seen : ts <= seen)) return;
    seen = ts;
    go = fn(ts, blob);
  };
  std::string buf;
  std::vector<std::pair<std::int64_t, std::string_view>> ticks;
  auto run = [&](sql::Statement& st, bool blocks) {
    auto rows =
        blocks ? st.query(minus_saturating(from, kMaxBlockSpanMs), to, from) : st.query(from, to);
    while (go && rows.next()) {
      const std::int64_t ts = rows.int64(0);
      if (!blocks) {
        emit(ts, rows.blob(1));
        continue;
      }
      if (!sample_codec::unpack_block(rows.blob(1), ts, buf, ticks)) continue;
      if (newest_first)
        for (auto it = ticks.rbegin(); go && it != ticks.rend(); ++it) emit(it->first, it->second);
      else
        for (auto it = ticks.begin(); go && it != ticks.end(); ++it) emit(it->first, it->second);
    }
    if (rows.failed()) throw db.error("cannot read history");
  };
  if (newest_first) {
    run(t.blocks_down, true);
    if (go) run(t.rows_down, false);
  } else {
    run(t.rows_up, false);
    if (go) run(t.blocks_up, true);
  }
}
}  // namespace

namespace {
// Thrown inside open_file() and commit() for a malformed file; recover() handles it.
struct Malformed : StoreError {
  using StoreError::StoreError;
};

// Tables an agent creates (any version); sqlite_* are SQLite's own (autoindexes).
bool our_table(std::string_view name) {
  return name == "series" || name == "samples" || name == "blocks" || name == "rollups" ||
         name == "hours" || name == "output_cursors" || name.starts_with("sqlite_");
}

// 20261202T041700Z
std::string utc_stamp() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}
}  // namespace

namespace {
// PRAGMA quick_check(1) on `db`: `code` SQLITE_ROW with the verdict ("ok" or the first problem, on
// one line, at most 200 bytes), or the error code with SQLite's message.
struct CheckVerdict {
  int code;
  std::string text;
};
CheckVerdict quick_check_verdict(sql::Connection& db) {
  sql::Statement st;
  int rc = st.prepare(db, "PRAGMA quick_check(1)", false);
  std::string verdict;
  if (rc == sql::kOk) {
    auto rows = st.query();
    if (rows.next()) verdict = rows.text(0);
    rc = rows.code();
  }
  if (rc != sql::kRow) verdict = db.message();
  std::replace(verdict.begin(), verdict.end(), '\n', ' ');  // one log line
  if (verdict.size() > 200) verdict.resize(200);
  return {rc, verdict};
}
}  // namespace

Store::Store(std::string path) : path_(std::move(path)) {
  try {
    open_file();
  } catch (const Malformed& e) {
    recover(e.what());
  }
}

// Nothing is written before the file is known to be ours (or new): a foreign database is left
// byte-identical. The checks only read; the first write is the WAL switch.
void Store::open_file() {
  // A new database file is made 0644 whatever the umask (files.hpp); SQLite gives its -wal and
  // -shm files the database's mode. If this fails, SQLite's open below says why in its words.
  try {
    create_file_if_absent(path_);
  } catch (const std::system_error&) {
  }
  const int rc = file_.db.open(path_, sql::Access::read_write_create, history_vfs());
  if (rc != sql::kOk) {
    std::string msg = path_ + ": cannot open: " + file_.db.message();
    close_file();
    if (sql::malformed(rc)) throw Malformed(msg);
    throw StoreError(msg);
  }
  file_.db.busy_timeout(1000);
  try {
    // One integer from a read-only statement.
    auto read_int = [&](const char* text) {
      sql::Statement st;
      int r = st.prepare(file_.db, text, false);
      std::int64_t v = 0;
      if (r == sql::kOk) {
        auto rows = st.query();
        if (rows.next()) v = rows.int64(0);
        r = rows.code();
      }
      if (r != sql::kRow) fail(std::string("cannot read (") + text + ")");
      return v;
    };
    const std::int64_t app = read_int("PRAGMA application_id");
    const std::int64_t version = read_int("PRAGMA user_version");
    std::vector<std::string> foreign;  // tables, views, triggers an agent does not make
    std::size_t objects = 0;
    {
      sql::Statement st;
      int r = st.prepare(file_.db, "SELECT name FROM sqlite_master", false);
      if (r == sql::kOk) {
        auto rows = st.query();
        while (rows.next()) {
          ++objects;
          std::string name(rows.text(0));
          if (!our_table(name)) foreign.push_back(std::move(name));
        }
        r = rows.code();
      }
      if (r != sql::kDone) fail("cannot read the schema");
    }
    const std::string leave =
        "; left untouched: move it away or set [agent] data_dir to another directory";
    if (app != 0 && app != kApplicationId) {
      char id[16];
      std::snprintf(id, sizeof id, "0x%08llx", static_cast<unsigned long long>(app) & 0xffffffff);
      throw ForeignDatabase(path_ + ": an SQLite database of another application (application_id " +
                            id + "), not a kiwi-agent history" + leave);
    }
    if (app == 0 && !foreign.empty()) {
      std::string list;
      for (std::size_t i = 0; i < foreign.size() && i < 5; ++i)
        list += (i ? ", " : "") + foreign[i];
      throw ForeignDatabase(path_ +
                            ": an SQLite database that is not a kiwi-agent history (it has " +
                            list + ")" + leave);
    }
    if (version > kSchemaVersion)
      throw StoreError(path_ + ": schema version " + std::to_string(version) +
                       ", this agent reads version " + std::to_string(kSchemaVersion) +
                       "; move the file aside to start a new history");
    if (app == 0 && objects > 0 && version == 0)  // our table names, never marked by an agent
      throw ForeignDatabase(path_ +
                            ": an SQLite database with tables named like a kiwi-agent history "
                            "but no schema version" +
                            leave);
    // A damaged page anywhere (not only where the next commit happens to go) is found by
    // quick_check, once, instead of by every commit after. It reads every page, so a file that
    // opening leaves as it is (ours, of this schema) is checked on a thread of its own while the
    // agent starts, and commit() takes the verdict before the first write; one that opening is
    // about to change is checked here, before anything is written to it.
    if (app == kApplicationId && version == kSchemaVersion) {
      check_ = std::async(std::launch::async, [path = path_] {
        // Behind start-up and the collector: where the agent has one CPU (a small board, or
        // pinned), the check at the default priority took the CPU from start-up (on a day of
        // history, 24.1 ms to the first 200, 26.9 ms of all threads' time runnable but waiting).
        // Nice 19, not SCHED_IDLE: under a CPU kept busy by others it still ends (commit() waits
        // for it). On Linux the nice value of a thread is its own.
        ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 19);
        sql::Connection db;
        std::string verdict = "ok";  // a check that cannot run leaves the commits to find damage
        if (db.open(path, sql::Access::read_only, history_vfs()) == sql::kOk) {
          db.busy_timeout(1000);
          if (auto v = quick_check_verdict(db); v.code == sql::kRow || sql::malformed(v.code))
            verdict = v.text;
        }
        return verdict;
      });
    } else {
      const CheckVerdict v = quick_check_verdict(file_.db);
      if (v.code != sql::kRow && !sql::malformed(v.code)) fail("quick_check");
      if (v.text != "ok") throw Malformed(path_ + ": quick_check: " + v.text);
    }

    // synchronous=NORMAL in WAL: a crash loses at most the last commits, never corrupts the file.
    // 1 KiB pages: a commit rewrites every page it touches, and a few seconds of samples fill
    // about one small page, so small pages cut the bytes written to flash per commit about
    // threefold (measured: docs/benchmarks.md). Takes effect only for a new file.
    auto exec = [&](const char* text) { file_.db.exec(text); };
    exec("PRAGMA page_size=1024");
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA synchronous=NORMAL");
    // Debian builds SQLite with secure_delete on, which overwrites every page pruning frees with
    // zeros: a WAL frame each. FAST only zeroes what is rewritten anyway; telemetry needs no
    // shredding. Measured: a sixth fewer WAL frames at steady state.
    exec("PRAGMA secure_delete=FAST");
    exec(kCacheSizePragma);
    const std::string mark = "PRAGMA application_id=" + std::to_string(kApplicationId) +
                             "; PRAGMA user_version=" + std::to_string(kSchemaVersion);
    if (version == 0) {
      exec("BEGIN");
      exec(
          "CREATE TABLE IF NOT EXISTS series(id INTEGER PRIMARY KEY, name TEXT NOT NULL, "
          "labels TEXT NOT NULL, unit TEXT NOT NULL, kind INTEGER NOT NULL, UNIQUE(name, labels))");
      exec("CREATE TABLE IF NOT EXISTS samples(ts INTEGER PRIMARY KEY, data BLOB NOT NULL)");
      exec("CREATE TABLE IF NOT EXISTS rollups(ts INTEGER PRIMARY KEY, data BLOB NOT NULL)");
      exec(mark.c_str());
      exec("COMMIT");
    }
    // Blocks are new in version 3; a file of version 1 or 2 gets the table and the mark (an
    // older agent then refuses it instead of missing every tick written from now on).
    exec(
        "CREATE TABLE IF NOT EXISTS blocks(ts INTEGER PRIMARY KEY, last INTEGER NOT NULL, ticks "
        "INTEGER NOT NULL, data BLOB NOT NULL)");
    // Hour rows are new in version 4 (a file of version 1-3 gets the table and the mark: an older
    // agent would rewrite a minute without refolding its hour).
    exec("CREATE TABLE IF NOT EXISTS hours(ts INTEGER PRIMARY KEY, data BLOB NOT NULL)");
    if (version != kSchemaVersion || app == 0) exec(mark.c_str());
    // Added in 0.4 without a version change: a file of either version gets it, and agents that
    // do not know it leave it alone. A no-op (no write) when it exists.
    exec(
        "CREATE TABLE IF NOT EXISTS output_cursors(name TEXT PRIMARY KEY, acked_ms INTEGER NOT "
        "NULL)");
    auto prepare = [&](sql::Statement& st, const char* text) {
      if (st.prepare(file_.db, text) != sql::kOk) fail("cannot prepare statement");
    };
    prepare(file_.insert_block,
            "INSERT OR REPLACE INTO blocks(ts, last, ticks, data) VALUES(?1, ?2, ?3, ?4)");
    prepare(file_.insert_rollup, "INSERT OR REPLACE INTO rollups(ts, data) VALUES(?1, ?2)");
    prepare(file_.delete_minute, "DELETE FROM rollups WHERE ts BETWEEN ?1 AND ?2");
    prepare(file_.delete_hour, "DELETE FROM hours WHERE ts BETWEEN ?1 AND ?2");
    prepare(file_.insert_hour, "INSERT OR REPLACE INTO hours(ts, data) VALUES(?1, ?2)");
    prepare(
        file_.prune_hours,
        "DELETE FROM hours WHERE ts IN (SELECT ts FROM hours WHERE ts < ?1 ORDER BY ts LIMIT ?2)");
    prepare(file_.rollup_next,
            "SELECT ts, data FROM rollups WHERE ts BETWEEN ?1 AND ?2 ORDER BY ts LIMIT 1");
    prepare(file_.rollup_at, "SELECT data FROM rollups WHERE ts = ?1");
    prepare(file_.oldest_hour, "SELECT ts FROM hours ORDER BY ts LIMIT 1");
    if (file_.ticks.prepare(file_.db) != sql::kOk) fail("cannot prepare statement");
    prepare(file_.prune_rollups,
            "DELETE FROM rollups WHERE ts IN (SELECT ts FROM rollups WHERE ts < ?1 ORDER BY ts "
            "LIMIT ?2)");
    prepare(file_.insert_series,
            "INSERT INTO series(id, name, labels, unit, kind) VALUES(?1, ?2, ?3, ?4, ?5)");
    prepare(file_.insert_cursor,
            "INSERT OR REPLACE INTO output_cursors(name, acked_ms) VALUES(?1, ?2)");
    prepare(file_.prune,
            "DELETE FROM blocks WHERE ts IN (SELECT ts FROM blocks WHERE ts < ?1 AND last < ?1 "
            "ORDER BY ts LIMIT ?2)");
    prepare(file_.prune_rows,
            "DELETE FROM samples WHERE ts IN (SELECT ts FROM samples WHERE ts < ?1 ORDER BY ts "
            "LIMIT ?2)");
    {
      // The hour of the newest minute row: folded when a minute of a later hour is written.
      sql::Statement m;
      rollup_hour_ = INT64_MIN;
      if (m.prepare(file_.db, "SELECT max(ts) FROM rollups", false) != sql::kOk)
        fail("cannot read rollups");
      auto rows = m.query();
      if (rows.next() && !rows.null(0)) rollup_hour_ = floor_to(rows.int64(0), kHourMs);
    }
    if (recoveries() > 0) return;  // a new file after a recovery: the catalog is kept in memory
    {
      sql::Statement c;
      if (c.prepare(file_.db, "SELECT name, acked_ms FROM output_cursors", false) != sql::kOk)
        fail("cannot read output cursors");
      for (auto rows = c.query(); rows.next();) cursors_[std::string(rows.text(0))] = rows.int64(1);
    }
    sql::Statement st;
    if (st.prepare(file_.db, "SELECT id, name, labels, unit, kind FROM series ORDER BY id",
                   false) != sql::kOk)
      fail("cannot read series");
    auto rows = st.query();
    while (rows.next()) {
      auto id = static_cast<std::uint32_t>(rows.int64(0));
      SeriesInfo s;
      s.name = rows.text(1);
      const std::string_view labels = rows.text(2);
      s.labels = parse_labels(labels);
      s.unit = rows.text(3);
      s.kind = static_cast<MetricKind>(rows.int32(4));
      assign_key(s.key, s.name, labels);
      if (id != series_count_ + 1)
        throw Malformed(path_ + ": series ids are not contiguous; the database is damaged");
      add_series(std::move(s));
    }
    if (rows.code() != sql::kDone) fail("cannot read series");
    series_committed_ = series_count_;
    publish_series();
  } catch (const Malformed&) {
    if (recoveries() == 0) forget_series();  // after a recovery the catalog is the one in use
    close_file();
    throw;
  } catch (const StoreError& e) {
    const int code = file_.db.errcode();
    if (recoveries() == 0) forget_series();
    close_file();
    if (sql::busy(code))  // history_vfs(): another agent, or a sqlite3 shell, has the file open
      throw StoreError(path_ +
                       ": in use by another process (the agent keeps its history file to "
                       "itself while it runs; stop that process or use another data_dir)");
    if (sql::malformed(code) && !dynamic_cast<const ForeignDatabase*>(&e))
      throw Malformed(e.what());
    throw;
  } catch (...) {
    close_file();
    throw;
  }
}

void Store::close_file() {
  file_ = {};
}

// The damaged file goes aside under a name of its own (with its WAL: it may hold the newest
// commits, for whoever wants to salvage them) and a new one takes its place. The catalog, the
// queue, the minute in progress and the cursors stay in memory: the next commit writes the whole
// catalog (series_committed_ = 0) and every cursor to the new file, so ids stay the same.
void Store::recover(const std::string& why) {
  {
    std::lock_guard lock(recovery_mutex_);
    if (recoveries_ >= kMaxRecoveries)
      throw StoreError(why + " (the history file was replaced " + std::to_string(recoveries_) +
                       " times since start already; not again until a restart)");
  }
  if (check_.valid()) check_.wait();  // of the file going aside: moot
  check_ = {};
  verdict_.reset();
  if (file_.db.is_open()) close_file();
  const std::string stamp = utc_stamp();
  std::string aside = path_ + ".corrupt-" + stamp;
  for (int n = 2; std::filesystem::exists(aside); ++n)
    aside = path_ + ".corrupt-" + stamp + "-" + std::to_string(n);
  std::error_code ec;
  std::filesystem::rename(path_, aside, ec);
  if (ec) throw StoreError(why + "; cannot move it to " + aside + ": " + ec.message());
  for (const char* suffix : {"-wal", "-shm"})
    if (std::filesystem::exists(path_ + suffix, ec))
      std::filesystem::rename(path_ + suffix, aside + suffix, ec);
  {
    std::lock_guard lock(pool_mutex_);
    ++pool_generation_;
    pool_.clear();
  }
  {
    std::lock_guard lock(recovery_mutex_);
    ++recoveries_;
    recovery_note_ = why + "; moved to " + aside + " and a new history started at " + stamp +
                     " (the samples in the damaged file are not served)";
  }
  try {
    open_file();
  } catch (const Malformed& e) {
    throw StoreError(std::string(e.what()) + " (a new file, just created)");
  }
  series_committed_ = 0;
  std::lock_guard lock(cursor_mutex_);
  for (auto& [name, acked] : cursors_) cursors_dirty_.try_emplace(name, acked);
}

std::uint64_t Store::recoveries() const {
  std::lock_guard lock(recovery_mutex_);
  return recoveries_;
}

std::string Store::recovery_note() const {
  std::lock_guard lock(recovery_mutex_);
  return recovery_note_;
}

Store::~Store() {
  pool_.clear();
  close_file();
}

void Store::fail(const std::string& what) const {
  throw file_.db.error(what);
}

// Ids are assigned in memory (contiguous, as loaded) and the series rows written by flush().
// Called for every metric of every tick: the lookup builds its key in a reused buffer.
std::uint32_t Store::series_id(const MetricValue& m, std::size_t position) {
  if (position < recent_ids_.size()) {
    const std::uint32_t id = recent_ids_[position];
    if (id >= 1 && id <= series_count_) {
      const std::size_t i = id - 1, n = SeriesCatalog::kChunk;
      const SeriesInfo& s = (*(*chunks_)[i / n])[i % n];
      if (s.name == m.name && s.labels == m.labels) return id;
    }
  }
  labels_buf_.clear();
  append_canonical_labels(labels_buf_, m.labels);
  assign_key(key_buf_, m.name, labels_buf_);
  if (auto it = series_ids_.find(key_buf_); it != series_ids_.end()) return it->second;
  const std::uint32_t id = add_series({key_buf_, m.name, m.labels, m.unit, m.kind});
  publish_series();
  return id;
}

std::uint32_t Store::add_series(SeriesInfo s) {
  constexpr std::size_t n = SeriesCatalog::kChunk;
  if (series_count_ == chunks_->size() * n) {
    // A new chunk: a new list (published views keep the old one, which nobody changes).
    auto next = std::make_shared<SeriesCatalog::Chunks>(*chunks_);
    next->push_back(std::make_shared<SeriesCatalog::Chunk>());
    chunks_ = std::move(next);
  }
  const auto id = static_cast<std::uint32_t>(series_count_ + 1);
  series_ids_.emplace(s.key, id);
  (*(*chunks_)[series_count_ / n])[series_count_ % n] = std::move(s);  // past every view's size
  ++series_count_;
  return id;
}

void Store::publish_series() {
  auto view = std::make_shared<const SeriesCatalog>(chunks_, series_count_);
  std::lock_guard lock(series_mutex_);
  series_ = std::move(view);
}

// A file that turned out malformed while its series were read: none of them count.
void Store::forget_series() {
  series_ids_.clear();
  recent_ids_.clear();
  chunks_ = std::make_shared<SeriesCatalog::Chunks>();
  series_count_ = 0;
  publish_series();
}

void Store::append(std::int64_t ts_ms, const std::vector<const MetricValue*>& metrics) {
  std::vector<std::pair<std::uint32_t, double>> values;
  values.reserve(metrics.size());
  recent_ids_.resize(metrics.size());
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    recent_ids_[i] = series_id(*metrics[i], i);
    values.emplace_back(recent_ids_[i], metrics[i]->value);
  }

  const std::int64_t minute = floor_to(ts_ms, kRollupMs);
  if (minute != minute_start_) {
    close_minute();
    begin_minute(minute);
  }
  add_to_minute(ts_ms, values);

  std::string blob;
  sample_codec::encode(blob, values);
  std::lock_guard lock(pending_mutex_);
  if (pending_.size() >= kMaxPendingRows) pending_.erase(pending_.begin());  // bounded memory
  pending_.emplace_back(ts_ms, std::move(blob));
}

void Store::add_to_minute(std::int64_t ts_ms,
                          const std::vector<std::pair<std::uint32_t, double>>& values) {
  minute_first_ = std::min(minute_first_, ts_ms);
  for (auto& [id, v] : values) {
    if (minute_.size() <= id) minute_.resize(id + 1);
    MinuteStats& m = minute_[id];
    m.min = m.n ? std::min(m.min, v) : v;
    m.max = m.n ? std::max(m.max, v) : v;
    m.sum += v;
    m.last = v;
    ++m.n;
  }
}

// A minute starts being summarised in memory. Its summary must cover every sample of that minute,
// including those it already has: written before a restart inside the minute (the collector
// closes the minute and flushes at stop, then the next run starts with no minute state), before
// a kill -9 (up to the last commit), or before close_current_minute() in this process. So the
// in-memory state is seeded by folding that minute's samples, from the file and from the queue,
// and close_minute() then replaces any stored row of the minute with the complete one.
// One code path for every case. The samples are folded rather than the stored row merged
// (mean x count): the row is itself a summary of exactly these samples, folding them keeps sums
// exact, and it also covers a minute whose row was never written (kill -9). Ids in sample rows
// are the catalogue's ids (loaded from the same file at open, new series appended after them).
// The usual case, a minute nobody wrote yet, costs one indexed probe that finds no row.
void Store::begin_minute(std::int64_t minute) {
  minute_start_ = minute;
  minute_first_ = INT64_MAX;
  const std::int64_t end = minute + kRollupMs;
  const std::size_t known = series_ids_.size();  // ids 1..known are in the catalogue
  std::vector<std::pair<std::uint32_t, double>> values;
  std::int64_t folded_until = INT64_MIN;
  auto fold = [&](std::int64_t ts, std::string_view blob) {
    values.clear();
    try {
      sample_codec::decode(blob, [&](std::uint32_t id, double v) {
        if (id >= 1 && id <= known) values.emplace_back(id, v);
      });
    } catch (const StoreError&) {
      return true;  // a damaged row: summarised without it, as queries read around it
    }
    add_to_minute(ts, values);
    folded_until = ts;
    return true;
  };
  if (file_.db.is_open()) {  // none: no file open now
    try {
      scan_ticks(file_.db, file_.ticks, minute, end - 1, false, fold);
    } catch (const StoreError&) {
      // The file's ticks are missed (the commit that follows will say what is wrong with it).
    }
  }
  {
    std::lock_guard lock(pending_mutex_);  // queued rows are newer than committed ones
    for (auto& [ts, blob] : pending_)
      if (ts >= minute && ts < end && ts > folded_until) fold(ts, blob);
  }
  open_minute_.store(minute, std::memory_order_release);
}

void Store::close_current_minute() {
  close_minute();
  minute_start_ = INT64_MIN;  // the next append, even in this minute, begins it afresh
  open_minute_.store(INT64_MAX, std::memory_order_release);
}

// Rollup blob: sample_codec pairs keyed id * 5 + k, k = 0 mean, 1 min, 2 max, 3 last, 4 count;
// key 0 (no series has id 0) is the offset of the minute's first sample from its start, in ms
// (agents before it ignore key 0, and a row without it reads as offset 0). One row per group of
// kGroupSeries ids (ids 64g .. 64g + 63), keyed minute + g; group 0 has key 0, so it is there
// for every minute that has a sample: it says that the minute has a rollup, and where it starts.
void Store::close_minute() {
  bool any = false;
  for (auto& m : minute_) any = any || m.n;
  if (!any) return;
  PendingMinute out{minute_start_, {}};
  std::vector<std::pair<std::uint32_t, double>> values;
  values.emplace_back(0, static_cast<double>(minute_first_ - minute_start_));
  for (std::uint32_t g = 0; g * kGroupSeries < minute_.size(); ++g) {
    const auto end = std::min<std::size_t>(minute_.size(), (g + 1) * kGroupSeries);
    for (std::uint32_t id = g * kGroupSeries; id < end; ++id) {
      const MinuteStats& m = minute_[id];
      if (!m.n) continue;
      values.insert(values.end(), {{id * 5 + 0, m.sum / m.n},
                                   {id * 5 + 1, m.min},
                                   {id * 5 + 2, m.max},
                                   {id * 5 + 3, m.last},
                                   {id * 5 + 4, static_cast<double>(m.n)}});
    }
    out.groups.emplace_back();
    if (values.empty()) continue;
    std::string blob;
    sample_codec::encode(blob, values);
    out.groups.back() = sample_codec::pack_if_smaller(std::move(blob));
    values.clear();
  }
  minute_.assign(minute_.size(), MinuteStats{});
  pending_rollups_.push_back(std::move(out));
  if (pending_rollups_.size() > kMaxPendingRows / 60)
    pending_rollups_.erase(pending_rollups_.begin());
}

std::size_t Store::pending_rows() const {
  std::lock_guard lock(pending_mutex_);
  return pending_.size();
}

void Store::flush(std::int64_t cutoff_ms, int prune_rows) {
  try {
    commit(cutoff_ms, prune_rows);
  } catch (const Malformed& e) {
    recover(e.what());  // throws when it cannot (or may not) start a new file
    commit(cutoff_ms, prune_rows);
  }
}

std::optional<std::string> Store::check_verdict(bool wait) {
  if (check_.valid() &&
      (wait || check_.wait_for(std::chrono::seconds(0)) == std::future_status::ready))
    verdict_ = check_.get();
  return verdict_;
}

bool Store::damage_found() {
  const auto v = check_verdict(false);
  return v && *v != "ok";
}

void Store::commit(std::int64_t cutoff_ms, int prune_rows) {
  if (!file_.db.is_open()) open_file();  // a recovery could not create the new file: again now
  if (const auto v = check_verdict(true); v && *v != "ok")
    throw Malformed(path_ + ": quick_check: " + *v);  // before anything is written to it
  std::vector<std::pair<std::int64_t, std::string>> rows;
  {
    std::lock_guard lock(pending_mutex_);
    rows = pending_;  // copied: queries keep seeing them until they are committed
  }
  const Catalog catalog = series();
  std::map<std::string, std::int64_t> cursors;
  {
    std::lock_guard lock(cursor_mutex_);
    cursors.swap(cursors_dirty_);
  }
  std::int64_t hour = rollup_hour_;  // as it will be after this commit
  file_.db.exec("BEGIN");
  try {
    for (auto& [name, acked] : cursors)
      if (file_.insert_cursor.execute(name, acked) != sql::kDone)
        fail("cannot write output cursor " + name);
    for (std::size_t i = series_committed_; i < catalog->size(); ++i) {
      auto& s = (*catalog)[i];
      if (file_.insert_series.execute(static_cast<std::int64_t>(i + 1), s.name,
                                      canonical_labels(s.labels), s.unit,
                                      static_cast<int>(s.kind)) != sql::kDone)
        fail("cannot add series " + s.key);
    }
    // One block per commit (more only for a queue longer than kMaxBlockSpanMs, or one whose
    // ticks do not rise: the collector's always do, a caller's might not).
    for (std::size_t i = 0, j; i < rows.size(); i = j) {
      for (j = i + 1; j < rows.size() && rows[j].first > rows[j - 1].first &&
                      rows[j].first - rows[i].first < kMaxBlockSpanMs;)
        ++j;
      const std::string block = sample_codec::pack_block(rows[i].first, &rows[i], &rows[0] + j);
      if (file_.insert_block.execute(rows[i].first, rows[j - 1].first,
                                     static_cast<std::int64_t>(j - i),
                                     sql::Blob{block}) != sql::kDone)
        fail("cannot write samples");
    }
    // A minute replaces every row it had (a rewrite after a restart inside it, or after the
    // clock went back), and opens its hour again: that hour's rows go, and it is folded anew
    // when a minute of another hour is written. Both deletes find nothing in the usual case (a
    // new minute of the open hour) and then write nothing.
    for (auto& pm : pending_rollups_) {
      const std::int64_t h = floor_to(pm.minute, kHourMs);
      step_range(file_.delete_hour, h, h + kHourMs - 1, "cannot write rollups");
      step_range(file_.delete_minute, pm.minute, pm.minute + kRollupMs - 1, "cannot write rollups");
      for (std::size_t g = 0; g < pm.groups.size(); ++g) {
        const std::string& blob = pm.groups[g];
        if (blob.empty()) continue;
        if (file_.insert_rollup.execute(pm.minute + static_cast<std::int64_t>(g),
                                        sql::Blob{blob}) != sql::kDone)
          fail("cannot write rollups");
      }
      // The hour of the minute before is over (or the clock went back out of it): fold it. Also
      // an hour the agent left when it stopped, on the first minute after a restart.
      if (hour != INT64_MIN && h != hour) fold_hour(hour);
      hour = h;
    }
    if (prune_rows > 0) prune(cutoff_ms, prune_rows);
    file_.db.exec("COMMIT");
  } catch (...) {
    const int code = file_.db.errcode();
    file_.db.try_exec("ROLLBACK");
    {
      std::lock_guard lock(cursor_mutex_);
      for (auto& [name, acked] : cursors) cursors_dirty_.try_emplace(name, acked);  // newer wins
    }
    if (!sql::malformed(code)) throw;
    try {
      throw;
    } catch (const std::exception& e) {
      throw Malformed(e.what());
    }
  }
  series_committed_ = catalog->size();
  pending_rollups_.clear();
  rollup_hour_ = hour;
  std::lock_guard lock(pending_mutex_);
  // Rows appended while this flush ran stay queued (append() only adds at the end, and drops
  // from the front only when the queue is full, which a successful flush makes impossible).
  auto committed_until = rows.empty() ? INT64_MIN : rows.back().first;
  auto it = std::find_if(pending_.begin(), pending_.end(),
                         [&](auto& r) { return r.first > committed_until; });
  pending_.erase(pending_.begin(), it);
}

int Store::prune(std::int64_t cutoff_ms, int max_rows) {
  int deleted = 0;
  // Blocks hold a tick or more, so max_rows of them are at least max_rows ticks. Rollups go at
  // 1/60 of that pace per group (a minute is a row per kGroupSeries series). Hour rows go a whole
  // hour at a time (series + 1 rows, the table's left edge) once their hour starts before the
  // cutoff; the minutes of it that are left are then read from their minute rows. Minute rows of
  // an hour that still has hour rows stay (with more hours behind than a commit prunes): the two
  // would disagree.
  const int groups = static_cast<int>(series_count_ / kGroupSeries + 1);
  const int hour_rows = static_cast<int>(series_count_ + 1);
  auto run = [&](sql::Statement& st, std::int64_t cut, int rows) {
    if (st.execute(cut, rows) != sql::kDone) fail("cannot prune old samples");
    deleted += file_.db.changes();
  };
  run(file_.prune, cutoff_ms, max_rows);
  run(file_.prune_rows, cutoff_ms, max_rows);
  run(file_.prune_hours,
      cutoff_ms == INT64_MIN ? cutoff_ms : floor_to(cutoff_ms - 1, kHourMs) + kHourMs, hour_rows);
  std::int64_t cut = cutoff_ms;
  {
    auto rows = file_.oldest_hour.query();
    if (rows.next()) cut = std::min(cut, floor_to(rows.int64(0), kHourMs));
    if (rows.failed()) fail("cannot prune old samples");
  }
  run(file_.prune_rollups, cut, (max_rows / 60 + 1) * groups);
  return deleted;
}

std::optional<std::int64_t> Store::cursor(const std::string& output) const {
  std::lock_guard lock(cursor_mutex_);
  auto it = cursors_.find(output);
  if (it == cursors_.end()) return std::nullopt;
  return it->second;
}

void Store::set_cursor(const std::string& output, std::int64_t acked_ms) {
  std::lock_guard lock(cursor_mutex_);
  cursors_[output] = acked_ms;
  cursors_dirty_[output] = acked_ms;
}

std::vector<Store::RawTick> Store::read_raw(std::int64_t after_ms, std::size_t max_values,
                                            bool* more) const {
  std::vector<RawTick> out;
  std::size_t values = 0;
  bool full = false;
  if (more) *more = false;
  // Adds one row; false once the batch is full.
  auto add = [&](std::int64_t ts, std::string_view blob) {
    RawTick tick{ts, {}};
    try {
      sample_codec::decode(blob,
                           [&](std::uint32_t id, double v) { tick.values.emplace_back(id, v); });
    } catch (const StoreError&) {
      return true;  // a damaged row is skipped, as queries skip it
    }
    if (!out.empty() && values + tick.values.size() > max_values) {
      full = true;
      return false;
    }
    values += tick.values.size();
    out.push_back(std::move(tick));
    return true;
  };
  // The queue is copied first: a flush that commits rows (and takes them off the queue) while the
  // file is read leaves them in this copy, so none falls between the two reads.
  std::vector<std::pair<std::int64_t, std::string>> queued;
  {
    std::lock_guard lock(pending_mutex_);
    for (auto& r : pending_)
      if (r.first > after_ms) queued.push_back(r);
  }
  auto conn = borrow();
  std::int64_t last = after_ms;
  if (after_ms < INT64_MAX) {
    scan_ticks(conn->db(), conn->ticks(), after_ms + 1, INT64_MAX, false,
               [&](std::int64_t ts, std::string_view blob) {
                 if (!add(ts, blob)) return false;
                 last = ts;
                 return true;
               });  // an error drops the connection with the exception
  }
  give_back(std::move(conn));
  if (more) *more = full;
  if (full) return out;
  // Queued rows are newer than committed ones; a row both committed and queued is read once.
  for (auto& [ts, blob] : queued)
    if (ts > last && !add(ts, blob)) break;
  if (more) *more = full;
  return out;
}

std::pair<std::uint64_t, std::int64_t> Store::ticks_after(std::int64_t after_ms) const {
  auto conn = borrow();
  std::uint64_t n = 0;
  std::int64_t newest = INT64_MIN;
  if (auto rows = conn->count_after().query(after_ms); rows.next()) {
    n = static_cast<std::uint64_t>(rows.int64(0) + rows.int64(2));
    for (int c : {1, 3})
      if (!rows.null(c)) newest = std::max<std::int64_t>(newest, rows.int64(c));
  }
  // A block that starts at or before after_ms may end after it: its later ticks count too.
  if (after_ms < INT64_MAX) {
    auto rows = conn->ticks().blocks_up.query(minus_saturating(after_ms, kMaxBlockSpanMs), after_ms,
                                              after_ms + 1);
    std::string buf;
    std::vector<std::pair<std::int64_t, std::string_view>> ticks;
    while (rows.next())
      if (sample_codec::unpack_block(rows.blob(1), rows.int64(0), buf, ticks))
        for (auto& t : ticks)
          if (t.first > after_ms) ++n, newest = std::max(newest, t.first);
  }
  give_back(std::move(conn));
  std::lock_guard lock(pending_mutex_);
  for (auto& [ts, blob] : pending_)
    if (ts > after_ms && ts > newest) {
      ++n;
      newest = ts;
    }
  return {n, newest};
}

Store::Catalog Store::series() const {
  std::lock_guard lock(series_mutex_);
  return series_;
}

std::unique_ptr<ReadConnection> Store::borrow() const {
  std::uint64_t generation;
  {
    std::lock_guard lock(pool_mutex_);
    if (!pool_.empty()) {
      auto conn = std::move(pool_.back());
      pool_.pop_back();
      return conn;
    }
    generation = pool_generation_;
  }
  auto conn = std::make_unique<ReadConnection>(path_);
  conn->generation = generation;
  return conn;
}

void Store::give_back(std::unique_ptr<ReadConnection> conn) const {
  std::lock_guard lock(pool_mutex_);
  if (conn->generation != pool_generation_) return;  // opened on a file since moved aside
  pool_.push_back(std::move(conn));
}

namespace {

// Accumulates one series over buckets (one bucket per row when not downsampling).
struct Column {
  std::size_t series_index;      // into the catalog
  std::vector<double> value;     // sum (mean), or the running min/max/last
  std::vector<std::uint32_t> n;  // values seen in the bucket
};

// `v` stands for `weight` samples (a minute rollup's mean, min, max or last, or one sample).
void accumulate(Column& c, std::size_t bucket, double v, Aggregate agg, std::uint32_t weight = 1) {
  if (c.value.size() <= bucket) {
    c.value.resize(bucket + 1, 0);
    c.n.resize(bucket + 1, 0);
  }
  double& acc = c.value[bucket];
  std::uint32_t& n = c.n[bucket];
  if (agg == Aggregate::mean)
    acc = (n ? acc : 0) + v * weight;
  else if (n == 0 || agg == Aggregate::last)
    acc = v;
  else if (agg == Aggregate::max)
    acc = std::max(acc, v);
  else
    acc = std::min(acc, v);
  n += weight;
}

// Key 0 of a rollup row (see close_minute()): the offset of the minute's first sample, in ms;
// 0 for a row without it. Encoding sorts keys, so it is the first entry when present.
std::int64_t first_sample_offset(std::string_view blob) {
  if (blob.empty() || blob.front() != sample_codec::kFormat2) return 0;
  blob.remove_prefix(1);
  std::uint64_t head = 0, v = 0;
  if (!sample_codec::get_varint(blob, head) || head >> 3 != 0) return 0;
  switch (head & 7) {
    case 0:
      return sample_codec::get_varint(blob, v) ? sample_codec::unzigzag(v) : 0;
    case 5:
      return sample_codec::get_varint(blob, v) ? sample_codec::unzigzag(v) * 1024 : 0;
    default:
      return 0;  // 3: the value 0; a float is never written for it
  }
}

}  // namespace

// Hour rows: for each series id > 0, sample_codec pairs keyed m * 5 + k (m the minute of the hour,
// 0..59; k as in a minute row), at ts = hour + id; and at ts = hour + 0 ("series 0") the hour's
// minute map: key m, value the offset of minute m's first sample, for every minute that has a
// rollup (a group 0 row). Made from the minute rows only, so they say exactly what those say: a
// minute without a group 0 row is missing from all of them, with the rows of its other groups (as
// a query of the minute rows reads that minute from its samples). An hour of whole-minute rows of
// a file of version 3 or before (ids beyond group 0 in a group 0 row), or one that does not
// decode, is left unfolded: queries read it from its minute rows, as before.
void Store::step_range(sql::Statement& st, std::int64_t a, std::int64_t b, const char* what) {
  if (st.execute(a, b) != sql::kDone) fail(what);
}

void Store::fold_hour(std::int64_t hour) {
  const std::int64_t end = hour + kHourMs - 1;
  auto clear_hour = [&] { step_range(file_.delete_hour, hour, end, "cannot write hour rows"); };
  clear_hour();
  std::vector<std::pair<std::uint32_t, double>> minutes;  // m -> first-sample offset
  std::vector<std::vector<std::pair<std::uint32_t, double>>> rows(kGroupSeries);
  std::string buf;
  bool ok = true;
  // Decodes a minute row (already unpacked) of minute m, group g, into `rows`.
  auto take = [&](std::uint32_t m, std::uint32_t g, std::string_view blob) {
    try {
      sample_codec::decode(blob, [&](std::uint32_t key, double v) {
        const std::uint32_t id = key / 5;
        if (id == 0) return;
        if (id / kGroupSeries != g) return void(ok = false);
        rows[id % kGroupSeries].emplace_back(m * 5 + key % 5, v);
      });
    } catch (const StoreError&) {
      ok = false;
    }
  };
  auto put = [&](std::int64_t ts, std::vector<std::pair<std::uint32_t, double>>& values) {
    std::string blob;
    sample_codec::encode(blob, values);
    blob = sample_codec::pack_if_smaller(std::move(blob));
    if (file_.insert_hour.execute(ts, sql::Blob{blob}) != sql::kDone)
      fail("cannot write hour rows");
    values.clear();
  };
  auto put_group = [&](std::uint32_t g) {
    for (std::uint32_t i = 0; i < kGroupSeries; ++i)
      if (!rows[i].empty()) put(hour + g * kGroupSeries + i, rows[i]);
  };
  // Group 0 of each minute: the minute map, and ids 1..63.
  for (std::int64_t cursor = hour; ok && cursor <= end;) {
    auto rows = file_.rollup_next.query(cursor, end);
    if (!rows.next()) {
      if (rows.failed()) fail("cannot read rollups");
      break;
    }
    const std::int64_t key = rows.int64(0);
    const std::int64_t minute = floor_to(key, kRollupMs);
    const auto m = static_cast<std::uint32_t>((minute - hour) / kRollupMs);
    if (key == minute)
      if (auto blob = sample_codec::unpack(rows.blob(1), buf)) {
        minutes.emplace_back(m, static_cast<double>(first_sample_offset(*blob)));
        take(m, 0, *blob);
      }
    cursor = minute + kRollupMs;
  }
  if (!ok || minutes.empty()) return clear_hour();
  put_group(0);
  for (std::uint32_t g = 1; ok && g * kGroupSeries <= series_count_; ++g) {
    for (auto& [m, offset] : minutes) {
      auto rows = file_.rollup_at.query(hour + m * kRollupMs + g);
      if (rows.next())
        if (auto blob = sample_codec::unpack(rows.blob(0), buf)) take(m, g, *blob);
      if (rows.failed()) fail("cannot read rollups");
    }
    if (ok) put_group(g);
  }
  if (!ok) return clear_hour();
  put(hour, minutes);
}

// Without a step: the latest `limit` samples in [since, until]. With a step: buckets aligned to
// multiples of it, and `limit` keeps the latest `limit` buckets that hold data (empty buckets are
// left out, so they do not count). A step without `since` has no window to read; it is found by
// widening one: first the `limit` buckets up to the newest sample, then twice as many, and so on,
// until the window holds `limit` buckets with data or reaches back to the oldest row. Every
// attempt starts on a bucket boundary, so no bucket is cut in two, and all attempts together read
// at most about twice the rows of the last one.
HistoryResult Store::query(const HistoryQuery& q) const {
  // Seconds to milliseconds, rounded (down for until, up for since) and saturated at the range
  // of int64: a double outside it (1.7e17 s, from a handler that checks less than ours) cast to
  // int64 is undefined. NaN reads as the far past.
  auto to_ms = [](double ms) {
    if (!(ms > -9.2e18)) return INT64_MIN;
    if (!(ms < 9.2e18)) return INT64_MAX;
    return static_cast<std::int64_t>(ms);
  };
  const std::int64_t until_ms = q.until ? to_ms(std::floor(*q.until * 1000)) : INT64_MAX;
  // A step longer than any history (a thousand years) is one bucket either way; capped there so
  // that bucket arithmetic stays far from overflow.
  constexpr double kMaxStepMs = 1000 * 366 * 86'400'000.0;
  const std::int64_t step_ms =
      q.step > 0 ? std::max<std::int64_t>(1, to_ms(std::round(std::min(q.step * 1000, kMaxStepMs))))
                 : 0;
  if (!step_ms || q.since) {
    const std::int64_t since_ms = q.since ? to_ms(std::ceil(*q.since * 1000)) : INT64_MIN;
    return query_window(q, since_ms, until_ms, step_ms);
  }

  std::int64_t newest = INT64_MIN, oldest = INT64_MAX;
  {
    std::lock_guard lock(pending_mutex_);
    for (auto& row : pending_)
      if (row.first <= until_ms)
        newest = std::max(newest, row.first), oldest = std::min(oldest, row.first);
  }
  {
    auto conn = borrow();
    scan_ticks(conn->db(), conn->ticks(), INT64_MIN, until_ms, true,
               [&](std::int64_t ts, std::string_view) {
                 newest = std::max(newest, ts);
                 return false;
               });  // an error drops the connection with the exception
    {
      auto rows = conn->bounds().query();
      if (!rows.next()) throw conn->db().error("cannot read history");  // conn dropped
      for (int c : {0, 1, 2})
        if (!rows.null(c)) {
          const std::int64_t v = rows.int64(c);  // a rollup key is minute + group
          oldest = std::min<std::int64_t>(oldest, c == 2 ? floor_to(v, kRollupMs) : v);
        }
    }
    give_back(std::move(conn));
  }
  if (newest == INT64_MIN) return {};
  const std::int64_t last = floor_to(newest, step_ms),
                     first = floor_to(std::min(oldest, newest), step_ms);
  for (double buckets = static_cast<double>(std::max<std::size_t>(1, q.limit));; buckets *= 2) {
    const double back = (buckets - 1) * static_cast<double>(step_ms);
    const std::int64_t from =
        back >= static_cast<double>(last - first) ? first : last - static_cast<std::int64_t>(back);
    HistoryResult r = query_window(q, from, until_ms, step_ms);
    if (r.timestamps.size() >= q.limit || from <= first) return r;
  }
}

HistoryResult Store::query_window(const HistoryQuery& q, std::int64_t since_ms,
                                  std::int64_t until_ms, std::int64_t step_ms) const {
  const Catalog catalog_ref = series();
  const SeriesCatalog& catalog = *catalog_ref;
  std::vector<char> wanted(catalog.size() + 1, 0);
  for (std::size_t id = 1; id <= catalog.size(); ++id) {
    auto& s = catalog[id - 1];
    bool ok = q.patterns.empty();
    for (auto& p : q.patterns) ok = ok || kiwi::glob_match(p, s.name) || kiwi::glob_match(p, s.key);
    wanted[id] = ok;
  }

  // Output points, oldest first: each bucket's start (a multiple of the step; without a step, the
  // sample's time) and the time it is labelled with. With a step, a bucket whose data runs in from
  // the bucket before it is labelled with its start, so evenly filled buckets are evenly spaced; a
  // bucket whose data begins inside it (the first in the window, the first after a gap: the
  // agent's first sample, a restart) is labelled with the time of its first sample. No point
  // claims a time before the data it summarises, nor before `since`.
  std::vector<std::int64_t> bucket_start, bucket_label;  // ms
  auto bucket_of = [&](std::int64_t b, std::int64_t first_ts) {
    if (bucket_start.empty() || bucket_start.back() != b) {
      const bool continued = step_ms && !bucket_start.empty() && bucket_start.back() == b - step_ms;
      bucket_start.push_back(b);
      bucket_label.push_back(continued ? b : std::max(b, first_ts));
    }
    return bucket_start.size() - 1;
  };
  std::vector<int> column_of(catalog.size() + 1, -1);
  std::vector<Column> columns;
  std::int64_t last_row_ts = INT64_MIN;
  auto add_row = [&](std::int64_t ts, std::string_view blob) {
    last_row_ts = ts;
    const std::size_t bucket = bucket_of(step_ms ? floor_to(ts, step_ms) : ts, ts);
    sample_codec::decode(blob, [&](std::uint32_t id, double v) {
      if (id == 0 || id >= wanted.size() || !wanted[id]) return;
      if (column_of[id] < 0) {
        column_of[id] = static_cast<int>(columns.size());
        columns.push_back({id - 1, {}, {}});
      }
      accumulate(columns[static_cast<std::size_t>(column_of[id])], bucket, v, q.aggregate);
    });
  };

  // A rollup row whose first sample is at `first_ts`: the five values of each series arrive
  // together (keys id * 5 + k, sorted); key 0 (id 0) is the first sample's offset.
  // One series' minute (mean, min, max, last; count) into `bucket`.
  auto add_parts = [&](std::size_t bucket, std::uint32_t id, const double* parts, double count) {
    if (column_of[id] < 0) {
      column_of[id] = static_cast<int>(columns.size());
      columns.push_back({id - 1, {}, {}});
    }
    const double chosen = parts[q.aggregate == Aggregate::mean  ? 0
                                : q.aggregate == Aggregate::min ? 1
                                : q.aggregate == Aggregate::max ? 2
                                                                : 3];
    accumulate(columns[static_cast<std::size_t>(column_of[id])], bucket, chosen, q.aggregate,
               static_cast<std::uint32_t>(count));
  };
  auto add_rollup = [&](std::int64_t ts, std::int64_t first_ts, std::string_view blob) {
    const std::size_t bucket = bucket_of(floor_to(ts, step_ms), first_ts);
    double parts[4] = {};
    sample_codec::decode(blob, [&](std::uint32_t key, double v) {
      const std::uint32_t id = key / 5, k = key % 5;
      if (id == 0 || id >= wanted.size() || !wanted[id]) return;
      if (k < 4) return void(parts[k] = v);
      add_parts(bucket, id, parts, v);
    });
  };

  // Ticks in [from, to], oldest first; the rollups of minutes starting in [from, to], unpacked.
  // An error drops the connection with the exception.
  auto conn = borrow();
  auto scan = [&](std::int64_t from, std::int64_t to, auto&& on_tick) {
    scan_ticks(conn->db(), conn->ticks(), from, to, false,
               [&](std::int64_t ts, std::string_view blob) {
                 on_tick(ts, blob);
                 return true;
               });
  };
  auto scan_rollups = [&](std::int64_t from, std::int64_t to, auto&& on_row) {
    auto rows = conn->rollups().query(from, to);
    std::string buf;
    while (rows.next())
      if (auto blob = sample_codec::unpack(rows.blob(1), buf))
        on_row(rows.int64(0), *blob);  // a damaged row reads as missing
    if (rows.failed()) throw conn->db().error("cannot read history");
  };
  // Without a step: the latest `limit` rows, read newest first and kept in that order until the
  // end. With a step: every row of the window, oldest first, folded into buckets as it streams.
  // With a step of a minute or more, a minute is read from its rollup when all of its samples lie
  // in the window, and from its samples otherwise: a minute begun before `since`, a minute whose
  // rollup was lost (kill -9), and the minute being summarised now, whose stored rollup (if the
  // agent restarted inside it) is only part of it.
  std::vector<std::pair<std::int64_t, std::string>> newest_first;
  std::int64_t covered_until = INT64_MIN;  // rows before this are in the rollups already read
  if (!step_ms) {
    scan_ticks(conn->db(), conn->ticks(), since_ms, until_ms, true,
               [&](std::int64_t ts, std::string_view blob) {
                 newest_first.emplace_back(ts, std::string(blob));
                 return newest_first.size() < q.limit;
               });
  } else {
    std::int64_t raw_from = since_ms;  // samples from here on are not in a rollup read
    if (step_ms >= kRollupMs) {
      const std::int64_t open = open_minute_.load(std::memory_order_acquire);
      // Minutes starting in [lo, hi] are read from their rollup; their rows are keyed up to hi_key.
      const std::int64_t lo = minus_saturating(since_ms, kRollupMs - 1);
      const std::int64_t hi = open == INT64_MAX ? until_ms : std::min(until_ms, open - 1);
      const std::int64_t hi_key = hi > INT64_MAX - kRollupMs ? INT64_MAX
                                  : hi < INT64_MIN + kRollupMs
                                      ? hi
                                      : floor_to(hi, kRollupMs) + kRollupMs - 1;
      // A minute that has a rollup (its group 0 row), first sample at first_ts: false if it is
      // read from its samples instead (it has samples before the window).
      auto take_minute = [&](std::int64_t minute, std::int64_t first_ts) {
        if (first_ts < since_ms) return false;
        if (minute > raw_from) scan(raw_from, minute - 1, add_row);
        raw_from = covered_until = minute + kRollupMs;
        return true;
      };
      std::vector<std::uint32_t> ids;  // wanted, if few
      for (std::uint32_t id = 1; id < wanted.size() && ids.size() <= kNarrowSeries; ++id)
        if (wanted[id]) ids.push_back(id);
      if (ids.size() > kNarrowSeries || hi < lo) {
        // Every row of every minute, group 0 first.
        std::int64_t taken = INT64_MIN, taken_first = 0;
        scan_rollups(lo, hi_key, [&](std::int64_t key, std::string_view blob) {
          const std::int64_t minute = floor_to(key, kRollupMs);
          if (minute < lo) return;
          if (key == minute) {
            const std::int64_t first_ts = minute + first_sample_offset(blob);
            if (!take_minute(minute, first_ts)) return;
            taken = minute, taken_first = first_ts;
          } else if (minute != taken) {
            return;  // a minute without a group 0 row is not a rollup
          }
          add_rollup(minute, taken_first, blob);
        });
      } else {
        // A few series: closed hours from their hour rows (the minute map, then a row per
        // series), other minutes from group 0 and the groups of those series; each row by its
        // key, so the cost does not grow with the series in the file.
        std::vector<std::uint32_t> groups;
        for (auto id : ids)
          if (id / kGroupSeries && (groups.empty() || groups.back() != id / kGroupSeries))
            groups.push_back(id / kGroupSeries);
        std::string buf;
        // Calls fn(unpacked data) for the row at `key` of `st`, if there is one that unpacks.
        auto row_at = [&](sql::Statement& st, std::int64_t key, auto&& fn) {
          auto rows = st.query(key);
          if (rows.next())
            if (auto blob = sample_codec::unpack(rows.blob(0), buf)) fn(*blob);
          if (rows.failed()) throw conn->db().error("cannot read history");
        };
        std::int64_t probed_hour = INT64_MIN;
        bool folded = false;
        std::vector<std::pair<std::uint32_t, std::int64_t>> minutes;  // of the hour: m, offset
        std::vector<double> five(ids.size() * 300);
        std::vector<char> has(ids.size() * 60);
        for (std::int64_t cursor = lo; cursor <= hi;) {
          std::int64_t minute;
          std::string row;  // group 0 of this minute, unpacked
          bool have_row = false;
          {
            auto rows = conn->rollup_next().query(cursor, hi_key);
            if (!rows.next()) {
              if (rows.failed()) throw conn->db().error("cannot read history");
              break;
            }
            const std::int64_t key = rows.int64(0);
            minute = floor_to(key, kRollupMs);
            if (key == minute && minute >= lo)
              if (auto blob = sample_codec::unpack(rows.blob(1), buf))
                row.assign(*blob), have_row = true;
          }
          if (minute < lo) {
            cursor = minute + kRollupMs;
            continue;
          }
          const std::int64_t hour = floor_to(minute, kHourMs);
          if (hour != probed_hour) {
            probed_hour = hour;
            folded = false;
            minutes.clear();
            row_at(conn->hour_at(), hour, [&](std::string_view blob) {
              sample_codec::decode(blob, [&](std::uint32_t m, double v) {
                minutes.emplace_back(m, static_cast<std::int64_t>(v));
              });
              folded = true;
            });
            if (folded) {
              std::fill(has.begin(), has.end(), 0);
              for (std::size_t i = 0; i < ids.size(); ++i)
                row_at(conn->hour_at(), hour + ids[i], [&](std::string_view blob) {
                  sample_codec::decode(blob, [&](std::uint32_t key5, double v) {
                    if (key5 >= 300) return;
                    five[i * 300 + key5] = v;
                    if (key5 % 5 == 4) has[i * 60 + key5 / 5] = 1;
                  });
                });
            }
          }
          if (folded) {
            for (auto& [m, offset] : minutes) {
              const std::int64_t at = hour + static_cast<std::int64_t>(m) * kRollupMs;
              if (m >= 60 || at < cursor || at > hi) continue;
              const std::int64_t first_ts = at + offset;
              if (!take_minute(at, first_ts)) continue;
              const std::size_t bucket = bucket_of(floor_to(at, step_ms), first_ts);
              for (std::size_t i = 0; i < ids.size(); ++i)
                if (has[i * 60 + m])
                  add_parts(bucket, ids[i], &five[i * 300 + m * 5], five[i * 300 + m * 5 + 4]);
            }
            if (hour > INT64_MAX - kHourMs) break;
            cursor = hour + kHourMs;
            continue;
          }
          cursor = minute + kRollupMs;
          if (!have_row) continue;  // no group 0 row: not a rollup
          const std::int64_t first_ts = minute + first_sample_offset(row);
          if (!take_minute(minute, first_ts)) continue;
          add_rollup(minute, first_ts, row);
          for (auto g : groups)
            row_at(conn->rollup_at(), minute + g,
                   [&](std::string_view blob) { add_rollup(minute, first_ts, blob); });
        }
      }
    }
    scan(raw_from, until_ms, add_row);
  }
  give_back(std::move(conn));

  // Rows not yet committed are the newest; merge those in the window.
  std::vector<std::pair<std::int64_t, std::string>> pending;
  {
    std::lock_guard lock(pending_mutex_);
    for (auto& row : pending_)
      if (row.first >= since_ms && row.first <= until_ms) pending.push_back(row);
  }
  // A row may be both committed and still queued while a flush finishes: keep one copy.
  std::int64_t committed_max = INT64_MIN;
  if (step_ms) {
    committed_max =
        covered_until == INT64_MIN ? last_row_ts : std::max(last_row_ts, covered_until - 1);
    for (auto& [ts, blob] : pending)
      if (ts > committed_max) add_row(ts, blob);
  } else {
    if (!newest_first.empty()) committed_max = newest_first.front().first;
    std::vector<std::pair<std::int64_t, std::string>> merged;
    for (auto it = pending.rbegin(); it != pending.rend(); ++it)
      if (it->first > committed_max) merged.push_back(std::move(*it));
    for (auto& row : newest_first) merged.push_back(std::move(row));
    if (merged.size() > q.limit) merged.resize(q.limit);
    newest_first = std::move(merged);
    for (auto it = newest_first.rbegin(); it != newest_first.rend(); ++it)
      add_row(it->first, it->second);
  }

  // Keep the latest `limit` points.
  const std::size_t points = bucket_start.size();
  const std::size_t skip = points > q.limit ? points - q.limit : 0;
  HistoryResult out;
  out.timestamps.reserve(points - skip);
  for (std::size_t i = skip; i < points; ++i)
    out.timestamps.push_back(static_cast<double>(bucket_label[i]) / 1000.0);
  // Stable output order: by series id (the order the agent first saw them).
  std::sort(columns.begin(), columns.end(),
            [](const Column& a, const Column& b) { return a.series_index < b.series_index; });
  for (auto& c : columns) {
    c.value.resize(points, 0);
    c.n.resize(points, 0);
    std::vector<double> values;
    values.reserve(points - skip);
    bool any = false;
    for (std::size_t i = skip; i < points; ++i) {
      double v = c.n[i] == 0                      ? std::nan("")
                 : q.aggregate == Aggregate::mean ? c.value[i] / c.n[i]
                                                  : c.value[i];
      any |= c.n[i] != 0;
      values.push_back(v);
    }
    if (!any) continue;  // only in points that `limit` cut off
    auto& s = catalog[c.series_index];
    out.series.push_back({s.key, s.name, s.labels, s.unit, s.kind, std::move(values)});
  }
  return out;
}

}  // namespace kiwi::agent
