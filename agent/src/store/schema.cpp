#include "store/schema.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <system_error>
#include <vector>

#include "base/files.hpp"
#include "store/store.hpp"

namespace kiwi::agent {

namespace {
// 2: sample blobs in sample_codec format 2. A version-1 file is taken over as it is (its rows
// stay in format 1, which decode() still reads) and marked 2, so an older agent refuses it
// instead of misreading the new rows.
// 3: ticks in blocks (a row per commit), rollups deflated. A file of version 1 or 2 gets the
// blocks table and is marked 3; its tick rows are read until retention prunes them.
// 4: rollup rows of at most 64 series each, keyed minute + group (group = series id / 64; group 0
// holds the first-sample offset), and per-series hour rows (table hours) folded from them when the
// hour is over. A file of version 1-3 gets the hours table and is marked 4; its whole-minute rows
// are read as group 0 (keyed minute + 0) until retention prunes them.
// 5: tiers with retentions of their own: hour rows (the minute summaries) are kept for
// minute_retention (30 days), past the raw ticks, and day rows (table days: the hour summaries)
// for hour_retention (a year). A file of version 4 gets the days table, its days are folded by
// the first commit, and it is marked 5: an agent of version 4 would prune its hour rows at its
// one retention.
// 6: new raw ticks go to the tick log beside the file (`<path>-ticks/`, tick_log.hpp), not to
// the blocks table. A file of version 5 keeps its blocks, read and pruned until retention has
// taken them, and is marked 6: an agent of version 5 would not see the ticks in the log.
constexpr int kSchemaVersion = 6;
constexpr int kPageSize = 4096;  // bytes (create_or_migrate() says why)

// Tables an agent creates (any version); sqlite_* are SQLite's own (autoindexes).
bool our_table(std::string_view name) {
  return name == "series" || name == "samples" || name == "blocks" || name == "rollups" ||
         name == "hours" || name == "days" || name == "output_cursors" || name == "alert_state" ||
         name == "alert_events" || name.starts_with("sqlite_");
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

// What the file says it is, read before anything is written.
struct Identity {
  std::int64_t app = 0;              // PRAGMA application_id
  std::int64_t version = 0;          // PRAGMA user_version
  std::int64_t page_size = 0;        // PRAGMA page_size
  std::size_t objects = 0;           // in sqlite_master
  std::vector<std::string> foreign;  // tables, views, triggers an agent does not make
};

Identity identify(sql::Connection& db) {
  // One integer from a read-only statement.
  auto read_int = [&](const char* text) {
    sql::Statement st;
    int r = st.prepare(db, text, false);
    std::int64_t v = 0;
    if (r == sql::kOk) {
      auto rows = st.query();
      if (rows.next()) v = rows.int64(0);
      r = rows.code();
    }
    if (r != sql::kRow) throw db.error(std::string("cannot read (") + text + ")");
    return v;
  };
  Identity id;
  id.app = read_int("PRAGMA application_id");
  id.version = read_int("PRAGMA user_version");
  id.page_size = read_int("PRAGMA page_size");
  sql::Statement st;
  int r = st.prepare(db, "SELECT name FROM sqlite_master", false);
  if (r == sql::kOk) {
    auto rows = st.query();
    while (rows.next()) {
      ++id.objects;
      std::string name(rows.text(0));
      if (!our_table(name)) id.foreign.push_back(std::move(name));
    }
    r = rows.code();
  }
  if (r != sql::kDone) throw db.error("cannot read the schema");
  return id;
}

// Another application's file, or one of a newer agent: refused, left byte-identical.
void refuse_unless_ours(const std::string& path, const Identity& id) {
  const std::string leave =
      "; left untouched: move it away or set [agent] data_dir to another directory";
  if (id.app != 0 && id.app != Store::kApplicationId) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08llx",
                  static_cast<unsigned long long>(id.app) & 0xffffffff);
    throw ForeignDatabase(path + ": an SQLite database of another application (application_id " +
                          hex + "), not a kiwi-agent history" + leave);
  }
  if (id.app == 0 && !id.foreign.empty()) {
    std::string list;
    for (std::size_t i = 0; i < id.foreign.size() && i < 5; ++i)
      list += (i ? ", " : "") + id.foreign[i];
    throw ForeignDatabase(path + ": an SQLite database that is not a kiwi-agent history (it has " +
                          list + ")" + leave);
  }
  if (id.version > kSchemaVersion)
    throw StoreError(path + ": schema version " + std::to_string(id.version) +
                     ", this agent reads version " + std::to_string(kSchemaVersion) +
                     "; move the file aside to start a new history");
  if (id.app == 0 && id.objects > 0 &&
      id.version == 0)  // our table names, never marked by an agent
    throw ForeignDatabase(path +
                          ": an SQLite database with tables named like a kiwi-agent history "
                          "but no schema version" +
                          leave);
}

// A file of ours in pages of another size than kPageSize (an older agent's, 1 KiB) is rewritten
// in kPageSize pages as it is opened (create_or_migrate()).
bool rewritten(const Identity& id) {
  return id.version > 0 && id.page_size != kPageSize;
}

// A damaged page anywhere (not only where the next commit happens to go) is found by
// quick_check, once, instead of by every commit after. It reads every page, so a file that
// opening leaves as it is (ours, of this schema) is checked on a thread of its own while the
// agent starts, and commit() takes the verdict before the first write; one that opening is
// about to change is checked here, before anything is written to it.
std::future<std::string> check(sql::Connection& db, const Identity& id) {
  if (id.app == Store::kApplicationId && id.version == kSchemaVersion && !rewritten(id))
    return std::async(std::launch::async, [path = db.path()] {
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
  const CheckVerdict v = quick_check_verdict(db);
  if (v.code != sql::kRow && !sql::malformed(v.code)) throw db.error("quick_check");
  if (v.text != "ok") throw Malformed(db.path() + ": quick_check: " + v.text);
  return {};
}

// The pragmas, and the tables a file of this identity lacks; marks it version 6.
void create_or_migrate(sql::Connection& db, const Identity& id) {
  // synchronous=FULL: the WAL is synced at each commit that wrote to it, as the tick log is at
  // each append (tick_log.hpp). Commits that write here are few (an hour's summaries and the
  // series new in it, once an hour; alerts, cursors); a sync writes no more bytes, it only
  // orders them. 4 KiB pages, the filesystem's block: what SQLite writes here is an hour's fold
  // and the pruning of an hour 30 days old, and a checkpoint copies each page it touched into a
  // block of its own (pages taken from the free list are spread over the file), so a 1 KiB page
  // cost a 4 KiB block at the checkpoint (measured: docs/benchmarks.md). page_size takes
  // effect for a new file; a file in 1 KiB pages (an older agent's) is rewritten in 4 KiB pages
  // as it is opened: VACUUM, in a rollback journal (SQLite cannot change the page size of a file
  // in WAL mode), which a crash or a full disk undoes, leaving the file as it was, to be
  // rewritten at the next start (its pages only cost more bytes meanwhile). An older agent's
  // file holds a day: a few MB, a second or so.
  const std::string page_size = "PRAGMA page_size=" + std::to_string(kPageSize);
  if (rewritten(id) && db.try_exec("PRAGMA journal_mode=DELETE") == sql::kOk &&
      db.try_exec(page_size.c_str()) == sql::kOk)
    db.try_exec("VACUUM");
  db.exec(page_size.c_str());
  db.exec("PRAGMA journal_mode=WAL");
  db.exec("PRAGMA synchronous=FULL");
  // Debian builds SQLite with secure_delete on, which overwrites every page pruning frees with
  // zeros: a WAL frame each. FAST only zeroes what is rewritten anyway; telemetry needs no
  // shredding. Measured: a sixth fewer WAL frames at steady state.
  db.exec("PRAGMA secure_delete=FAST");
  db.exec(kCacheSizePragma);
  const std::string mark = "PRAGMA application_id=" + std::to_string(Store::kApplicationId) +
                           "; PRAGMA user_version=" + std::to_string(kSchemaVersion);
  if (id.version == 0) {
    db.exec("BEGIN");
    // No UNIQUE(name, labels): the agent's catalog keeps names unique, and the index it made
    // took a leaf at a random place for every new series, 3-5 pages a commit where processes'
    // command labels come and go (a fifth of the bytes written; files of version 4 keep theirs).
    db.exec(
        "CREATE TABLE IF NOT EXISTS series(id INTEGER PRIMARY KEY, name TEXT NOT NULL, "
        "labels TEXT NOT NULL, unit TEXT NOT NULL, kind INTEGER NOT NULL)");
    db.exec("CREATE TABLE IF NOT EXISTS samples(ts INTEGER PRIMARY KEY, data BLOB NOT NULL)");
    db.exec("CREATE TABLE IF NOT EXISTS rollups(ts INTEGER PRIMARY KEY, data BLOB NOT NULL)");
    db.exec(mark.c_str());
    db.exec("COMMIT");
  }
  // Blocks are new in version 3; a file of version 1 or 2 gets the table and the mark (an
  // older agent then refuses it instead of missing every tick written from now on).
  db.exec(
      "CREATE TABLE IF NOT EXISTS blocks(ts INTEGER PRIMARY KEY, last INTEGER NOT NULL, ticks "
      "INTEGER NOT NULL, data BLOB NOT NULL)");
  // Hour rows are new in version 4 (a file of version 1-3 gets the table and the mark: an older
  // agent would rewrite a minute without refolding its hour).
  db.exec("CREATE TABLE IF NOT EXISTS hours(ts INTEGER PRIMARY KEY, data BLOB NOT NULL)");
  // Day rows are new in version 5.
  db.exec("CREATE TABLE IF NOT EXISTS days(ts INTEGER PRIMARY KEY, data BLOB NOT NULL)");
  if (id.version != kSchemaVersion || id.app == 0) db.exec(mark.c_str());
  // Added in 0.4 without a version change: a file of either version gets it, and agents that
  // do not know it leave it alone. A no-op (no write) when it exists.
  db.exec(
      "CREATE TABLE IF NOT EXISTS output_cursors(name TEXT PRIMARY KEY, acked_ms INTEGER NOT "
      "NULL)");
  // Added in 0.5 the same way: the alerts' state and their transitions (alert_log.hpp).
  db.exec("CREATE TABLE IF NOT EXISTS alert_state(id INTEGER PRIMARY KEY, data TEXT NOT NULL)");
  db.exec("CREATE TABLE IF NOT EXISTS alert_events(seq INTEGER PRIMARY KEY, data TEXT NOT NULL)");
}
}  // namespace

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

sql::Connection open_history(const std::string& path) {
  // A new database file is made 0644 whatever the umask (files.hpp); SQLite gives its -wal and
  // -shm files the database's mode. If this fails, SQLite's open below says why in its words.
  try {
    create_file_if_absent(path);
  } catch (const std::system_error&) {
  }
  sql::Connection db;
  const int rc = db.open(path, sql::Access::read_write_create, history_vfs());
  if (rc != sql::kOk) {
    std::string msg = path + ": cannot open: " + db.message();
    if (sql::malformed(rc)) throw Malformed(msg);
    throw StoreError(msg);
  }
  db.busy_timeout(1000);
  return db;
}

// Nothing is written before the file is known to be ours (or new): a foreign database is left
// byte-identical. The checks only read; the first write is the WAL switch.
std::future<std::string> set_up_history(sql::Connection& db) {
  const Identity id = identify(db);
  refuse_unless_ours(db.path(), id);
  std::future<std::string> verdict = check(db, id);
  create_or_migrate(db, id);
  return verdict;
}

// The damaged file goes aside under a name of its own (with its WAL: it may hold the newest
// commits, for whoever wants to salvage them) and a new one takes its place.
std::string move_aside(const std::string& path, const std::string& why, std::string& stamp) {
  stamp = utc_stamp();
  std::string aside = path + ".corrupt-" + stamp;
  for (int n = 2; std::filesystem::exists(aside); ++n)
    aside = path + ".corrupt-" + stamp + "-" + std::to_string(n);
  std::error_code ec;
  std::filesystem::rename(path, aside, ec);
  if (ec) throw StoreError(why + "; cannot move it to " + aside + ": " + ec.message());
  for (const char* suffix : {"-wal", "-shm"})
    if (std::filesystem::exists(path + suffix, ec))
      std::filesystem::rename(path + suffix, aside + suffix, ec);
  return aside;
}

}  // namespace kiwi::agent
