// The history file (store/schema.hpp): whose file it is, versions 1-3 taken over, quick_check, and
// a damaged file moved aside.
#include <sqlite3.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <thread>

#include "emulator.hpp"
#include "store/sample_codec.hpp"
#include "store/tick_log.hpp"
#include "store_test_support.hpp"

using namespace kiwi::agent;
using namespace store_test;

namespace {
// `n` bytes of noise (seeded: the same every run) over `path` from `offset`.
void scribble(const std::string& path, long offset, std::size_t n, unsigned seed) {
  std::string junk(n, '\0');
  std::uint32_t x = seed;
  for (auto& c : junk) c = static_cast<char>((x = x * 1664525u + 1013904223u) >> 24);
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  REQUIRE(f);
  std::fseek(f, offset, SEEK_SET);
  std::fwrite(junk.data(), 1, junk.size(), f);
  std::fclose(f);
}
}  // namespace

TEST_CASE("store: a file that is not a database is moved aside and a new history started") {
  TempDb db;
  const std::string text =
      "this is not sqlite, it is a text file long enough to have a header..........";
  {
    std::FILE* f = std::fopen(db.path().c_str(), "w");
    std::fputs(text.c_str(), f);
    std::fclose(f);
  }
  Store store(db.path());
  CHECK(store.recoveries() == 1);
  CHECK_THAT(store.recovery_note(), Catch::Contains(db.path()) &&
                                        Catch::Contains("not a database") &&
                                        Catch::Contains(db.path() + ".corrupt-"));
  std::vector<fs::path> aside;
  for (auto& e : fs::directory_iterator(db.dir))
    if (e.path().filename().string().starts_with("kiwi.db.corrupt-")) aside.push_back(e.path());
  REQUIRE(aside.size() == 1);
  CHECK(slurp(aside[0]) == text);
  append(store, 1000, {metric("a", 1, "")});
  CHECK(kiwi_test::rows_on_disk(db.path()) == 1);
}

TEST_CASE("store: a page damaged while closed is found by quick_check and moved aside unwritten") {
  TempDb db;
  // Values that do not repeat, so that blocks do not compress to almost nothing.
  auto wide_at = [](int t) {
    std::vector<kiwi::MetricValue> wide;
    for (int s = 0; s < 50; ++s)
      wide.push_back(metric("m" + std::to_string(s), ((t * 7919 + s * 104729) % 100003) / 7.0, ""));
    return wide;
  };
  const auto wide = wide_at(0);
  {  // 200 ticks over 66 minutes: the first hour's minute summaries are in the file
    Store store(db.path());
    for (int t = 0; t < 200; ++t) append(store, t * 20'000, wide_at(t), t % 10 == 9);
    store.flush(0, 0);
  }
  REQUIRE(fs::file_size(db.path()) > 20 * 1024);
  // Past the tables' root pages (read at open), in the hour rows' data: found by quick_check
  // only.
  scribble(db.path(), 16 * 1024, 2048, 16);  // dd bs=1024 seek=16 count=2, deterministic
  const std::string damaged = slurp(db.path());
  SECTION("the collector asks, and flushes once the check has found it") {
    Store store(db.path());
    CHECK(store.recoveries() == 0);  // opened: the check runs on a thread of its own
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!store.damage_found() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    REQUIRE(store.damage_found());
    CHECK(slurp(db.path()) == damaged);  // nothing written to it meanwhile
    append(store, 4'000'000, wide);      // the flush moves it aside and commits to a new file
    CHECK(store.recoveries() == 1);
    CHECK_THAT(store.recovery_note(),
               Catch::Contains("quick_check") && Catch::Contains("new history started"));
    CHECK_FALSE(store.damage_found());  // the new file's
    // The ticks are in the tick log, not in the damaged file: they stay, under the same ids.
    CHECK(kiwi_test::rows_on_disk(db.path()) == 201);
    CHECK(store.series()->size() == 50);  // ids kept: the catalog is in memory
  }
  SECTION("a flush before the check has finished waits for its verdict") {
    Store store(db.path());
    append(store, 4'000'000, wide);
    CHECK(store.recoveries() == 1);
    CHECK(kiwi_test::rows_on_disk(db.path()) == 201);
    std::vector<fs::path> aside;
    for (auto& e : fs::directory_iterator(db.dir))
      if (e.path().filename().string().starts_with("kiwi.db.corrupt-")) aside.push_back(e.path());
    REQUIRE(aside.size() == 1);
    CHECK(slurp(aside[0]) == damaged);
  }
}

TEST_CASE("store: a commit that finds the file damaged moves it aside and keeps queue and ids") {
  TempDb db;
  std::vector<kiwi::MetricValue> wide;
  for (int s = 0; s < 50; ++s) wide.push_back(metric("m" + std::to_string(s), 0.25 + s, ""));
  Store store(db.path());
  for (int t = 0; t < 300; ++t) append(store, t * 1000, wide, t % 10 == 9);
  {
    // Everything into the main file (a connection of this process may share it: unix-excl),
    // then every page but the header damaged under the open store.
    sqlite3* h = nullptr;
    REQUIRE(sqlite3_open_v2(db.path().c_str(), &h, SQLITE_OPEN_READWRITE, "unix-excl") ==
            SQLITE_OK);
    REQUIRE(sqlite3_exec(h, "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr) ==
            SQLITE_OK);
    sqlite3_close(h);
  }
  const auto size = fs::file_size(db.path());
  scribble(db.path(), 1024, static_cast<std::size_t>(size) - 1024, 7);
  // Queued, not committed: these must reach the new file, with the series they name.
  std::vector<kiwi::MetricValue> more = wide;
  more.push_back(metric("late", 5, ""));
  append(store, 301'000, more, false);
  append(store, 302'000, more, false);
  store.flush(250'000, 100);  // reads the damaged pages (pruning the oldest rows)
  CHECK(store.recoveries() == 1);
  CHECK(store.pending_rows() == 0);
  // The ticks committed before are in the tick log, not in the damaged file: they stay.
  CHECK(kiwi_test::rows_on_disk(db.path()) == 302);
  kiwi::HistoryQuery q;
  q.patterns = {"late", "m3"};
  q.limit = 3;
  auto r = store.query(q);
  CHECK(r.timestamps == std::vector<double>{299, 301, 302});
  REQUIRE(r.series.size() == 2);
  CHECK(r.series[0].key == "m3");
  CHECK(r.series[1].key == "late");
}

TEST_CASE("store: another application's SQLite file is refused before anything is written") {
  TempDb db;
  {
    sqlite3* h;
    sqlite3_open(db.path().c_str(), &h);
    sqlite3_exec(h, "CREATE TABLE foo(x); INSERT INTO foo VALUES(42)", nullptr, nullptr, nullptr);
    sqlite3_close(h);
  }
  const std::string before = slurp(db.path());
  CHECK_THROWS_AS(Store(db.path()), ForeignDatabase);
  CHECK_THROWS_WITH(Store(db.path()), Catch::Contains("foo") && Catch::Contains("left untouched"));
  CHECK(slurp(db.path()) == before);
  CHECK_FALSE(fs::exists(db.path() + "-wal"));
}

TEST_CASE("store: our own files carry the application id, an older agent file is adopted") {
  TempDb db;
  { Store store(db.path()); }
  auto pragma = [&](const char* sql) {
    sqlite3* h;
    sqlite3_open(db.path().c_str(), &h);
    sqlite3_stmt* st;
    sqlite3_prepare_v2(h, sql, -1, &st, nullptr);
    sqlite3_step(st);
    const auto v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return v;
  };
  CHECK(pragma("PRAGMA application_id") == Store::kApplicationId);
  // As an agent before application_id left it.
  {
    sqlite3* h;
    sqlite3_open(db.path().c_str(), &h);
    sqlite3_exec(h, "PRAGMA application_id=0", nullptr, nullptr, nullptr);
    sqlite3_close(h);
  }
  { Store store(db.path()); }
  CHECK(pragma("PRAGMA application_id") == Store::kApplicationId);
}

TEST_CASE("store: a database from a newer agent is refused, not rewritten") {
  TempDb db;
  {
    sqlite3* h;
    sqlite3_open(db.path().c_str(), &h);
    sqlite3_exec(h, "PRAGMA user_version=7", nullptr, nullptr, nullptr);
    sqlite3_close(h);
  }
  CHECK_THROWS_WITH(Store(db.path()), Catch::Contains("schema version 7"));
}

TEST_CASE("store: a version-1 database is taken over: its rows still read, new ticks in the log") {
  TempDb db;
  {
    // What the agent wrote before schema version 2: a format-1 row (id 1 = 1.5 as float32).
    sqlite3* h;
    sqlite3_open(db.path().c_str(), &h);
    sqlite3_exec(h,
                 "PRAGMA page_size=1024; PRAGMA journal_mode=WAL;"
                 "CREATE TABLE series(id INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                 " labels TEXT NOT NULL, unit TEXT NOT NULL, kind INTEGER NOT NULL,"
                 " UNIQUE(name, labels));"
                 "CREATE TABLE samples(ts INTEGER PRIMARY KEY, data BLOB NOT NULL);"
                 "CREATE TABLE rollups(ts INTEGER PRIMARY KEY, data BLOB NOT NULL);"
                 "INSERT INTO series VALUES(1, 'x', '', 'celsius', 0);"
                 "INSERT INTO samples VALUES(1000, X'050000C03F');"
                 "PRAGMA user_version=1;",
                 nullptr, nullptr, nullptr);
    sqlite3_close(h);
  }
  {
    Store store(db.path());
    append(store, 2000, {metric("x", 2.5, "celsius"), metric("y", 0, "")});
    auto r = store.query({});
    REQUIRE(r.series.size() == 2);
    CHECK(r.series[0].values == std::vector<double>{1.5, 2.5});
    CHECK(std::isnan(r.series[1].values[0]));
    CHECK(r.series[1].values[1] == 0);
  }
  // Marked version 6, so an older agent refuses the file instead of missing the new ticks.
  CHECK(kiwi_test::sqlite_value(db.path(), "PRAGMA user_version") == "6");
  // Rewritten once in 4 KiB pages, and in WAL mode again.
  CHECK(kiwi_test::sqlite_value(db.path(), "PRAGMA page_size") == "4096");
  CHECK(kiwi_test::sqlite_value(db.path(), "PRAGMA journal_mode") == "wal");
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT count(*) FROM samples") == "1");  // as it was
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT count(*) FROM blocks") == "0");
  CHECK(kiwi_test::ticks_in_log(db.path()) == 1);
  const std::string log = slurp(db.path() + "-ticks/0.ticks");  // the hour of 2000 ms
  REQUIRE(log.size() > 32);
  std::string_view payload = std::string_view(log).substr(32);
  REQUIRE(payload[0] == TickLog::kCarried);  // the series new since the file's last fold
  payload.remove_prefix(1);
  std::uint64_t carried = 0;
  REQUIRE(sample_codec::get_varint(payload, carried));
  CHECK(payload[carried] == 3);  // the block: format 3, too small to deflate
  Store again(db.path());
  CHECK(again.query({}).series[0].values == std::vector<double>{1.5, 2.5});
}

TEST_CASE(
    "store: an older agent's file that a full disk keeps from being rewritten is taken over as it "
    "is") {
  // The rewrite in 4 KiB pages (VACUUM) journals every page of the file first; on a disk without
  // that much room it fails, and the file goes on in its 1 KiB pages, every row there.
  TempDb db;
  kiwi_test::TinyFilesystem tiny(db.dir / "tiny", "192k");
  if (!tiny.mounted())
    kiwi_test::skip_test("cannot mount a tmpfs here (needs root); full-disk test not run");
  const std::string path = (tiny.path() / "kiwi.db").string();
  {
    sqlite3* h;
    REQUIRE(sqlite3_open(path.c_str(), &h) == SQLITE_OK);
    std::string sql =  // in WAL mode at the end, as an older agent leaves it
        "PRAGMA page_size=1024;"
        "CREATE TABLE series(id INTEGER PRIMARY KEY, name TEXT NOT NULL, labels TEXT NOT NULL,"
        " unit TEXT NOT NULL, kind INTEGER NOT NULL);"
        "CREATE TABLE samples(ts INTEGER PRIMARY KEY, data BLOB NOT NULL);"
        "CREATE TABLE rollups(ts INTEGER PRIMARY KEY, data BLOB NOT NULL);"
        "CREATE TABLE blocks(ts INTEGER PRIMARY KEY, last INTEGER NOT NULL, ticks INTEGER NOT NULL,"
        " data BLOB NOT NULL);"
        "CREATE TABLE hours(ts INTEGER PRIMARY KEY, data BLOB NOT NULL);"
        "CREATE TABLE days(ts INTEGER PRIMARY KEY, data BLOB NOT NULL);"
        "BEGIN;";
    for (int i = 1; i <= 120; ++i)  // a page each
      sql += "INSERT INTO series VALUES(" + std::to_string(i) + ", 's" + std::to_string(i) +
             "', '{\"l\":\"" + std::string(800, 'a' + i % 26) + "\"}', '', 0);";
    sql += "COMMIT; PRAGMA application_id=" + std::to_string(Store::kApplicationId) +
           "; PRAGMA user_version=5; PRAGMA journal_mode=WAL;";
    REQUIRE(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(h);
  }
  {
    Store store(path);
    CHECK(store.series()->size() == 120);
  }
  CHECK(kiwi_test::sqlite_value(path, "PRAGMA page_size") == "1024");
  CHECK(kiwi_test::sqlite_value(path, "PRAGMA journal_mode") == "wal");
  CHECK(kiwi_test::sqlite_value(path, "PRAGMA user_version") == "6");
  CHECK(kiwi_test::sqlite_value(path, "SELECT count(*) FROM series") == "120");
  CHECK(kiwi_test::quick_check(path) == "ok");
  // With room, the next start rewrites it.
  REQUIRE(tiny.grow("2m"));
  {
    Store store(path);
    CHECK(store.series()->size() == 120);
  }
  CHECK(kiwi_test::sqlite_value(path, "PRAGMA page_size") == "4096");
  CHECK(kiwi_test::sqlite_value(path, "PRAGMA journal_mode") == "wal");
  CHECK(kiwi_test::sqlite_value(path, "SELECT count(*) FROM series") == "120");
}

TEST_CASE("store: the WAL index stays in memory and other processes are kept out") {
  TempDb db;
  Store store(db.path());
  append(store, 1000, {metric("a", 0.25)});
  // No -shm file: SQLite's WAL index is in this process's memory, not dirtied on disk per commit.
  CHECK(fs::exists(db.path() + "-wal"));
  CHECK_FALSE(fs::exists(db.path() + "-shm"));
  // Connections of this process share it: the read-only ones the HTTP workers use, and others.
  CHECK(store.query({}).series.at(0).values == std::vector<double>{0.25});
  CHECK(kiwi_test::quick_check(db.path()) == "ok");
  // Another process (here a second agent on the same data dir) is refused, with the reason.
  const fs::path config = db.dir / "second.toml";
  {
    std::FILE* f = std::fopen(config.c_str(), "w");
    REQUIRE(f);
    std::fprintf(f,
                 "[agent]\ndata_dir = \"%s\"\n[http]\nbind = \"127.0.0.1:0\"\n"
                 "[collector]\nsnapshot_path = \"\"\n",
                 db.dir.c_str());
    std::fclose(f);
  }
  const fs::path log = db.dir / "second.log";
  const auto args = kiwi_test::emulated({KIWI_AGENT_BIN, "--config", config.string()});
  std::vector<char*> argv;
  for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (std::freopen(log.c_str(), "w", stderr)) execv(argv[0], argv.data());
    _exit(127);
  }
  // It should give up within its 1 s busy timeout; one that started anyway is stopped here.
  int status = 0;
  bool exited = false;
  for (int i = 0; i < 150 && !exited; ++i) {
    exited = waitpid(pid, &status, WNOHANG) == pid;
    if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  CHECK(exited);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) != 0));
  std::string out;
  if (std::FILE* f = std::fopen(log.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, f)) out += buf;
    std::fclose(f);
  }
  CHECK_THAT(out, Catch::Contains(db.path()) && Catch::Contains("in use by another process"));
  append(store, 2000, {metric("a", 0.5)});  // still ours
  CHECK(store.query({}).series.at(0).values == std::vector<double>{0.25, 0.5});
}

TEST_CASE("store: a version-2 database's tick rows are read beside the blocks, then pruned") {
  TempDb db;
  {
    // Version 2 wrote a row per tick (format 2) and plain rollups: ticks at 0..59 s of series 1
    // with the value of the second, and the rollup of that minute.
    std::vector<std::pair<std::uint32_t, double>> v;
    std::string sql =
        "PRAGMA page_size=1024; PRAGMA journal_mode=WAL;"
        "CREATE TABLE series(id INTEGER PRIMARY KEY, name TEXT NOT NULL,"
        " labels TEXT NOT NULL, unit TEXT NOT NULL, kind INTEGER NOT NULL, UNIQUE(name, labels));"
        "CREATE TABLE samples(ts INTEGER PRIMARY KEY, data BLOB NOT NULL);"
        "CREATE TABLE rollups(ts INTEGER PRIMARY KEY, data BLOB NOT NULL);"
        "INSERT INTO series VALUES(1, 'x', '', '', 0);";
    auto hex = [](const std::string& b) {
      static const char* d = "0123456789ABCDEF";
      std::string h;
      for (unsigned char c : b) h += {d[c >> 4], d[c & 15]};
      return h;
    };
    for (int t = 0; t < 60; ++t) {
      v = {{1, double(t)}};
      std::string blob;
      kiwi::agent::sample_codec::encode(blob, v);
      sql += "INSERT INTO samples VALUES(" + std::to_string(t * 1000) + ", X'" + hex(blob) + "');";
    }
    v = {{0, 0}, {5, 29.5}, {6, 0}, {7, 59}, {8, 59}, {9, 60}};  // mean, min, max, last, count
    std::string rollup;
    kiwi::agent::sample_codec::encode(rollup, v);
    sql += "INSERT INTO rollups VALUES(0, X'" + hex(rollup) + "'); PRAGMA user_version=2;";
    sqlite3* h;
    sqlite3_open(db.path().c_str(), &h);
    REQUIRE(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(h);
  }
  Store store(db.path());
  for (int t = 60; t < 120; ++t) {
    append(store, t * 1000, {metric("x", t, "")}, false);
    if (t % 10 == 9) store.flush(0, 0);
  }
  CHECK(kiwi_test::sqlite_value(db.path(), "PRAGMA user_version") == "6");
  CHECK(kiwi_test::rows_on_disk(db.path()) == 120);
  // The latest 5 run from the blocks; 8 around 60 s cross from the rows to the blocks.
  kiwi::HistoryQuery q;
  q.limit = 5;
  CHECK(store.query(q).series.at(0).values == std::vector<double>{115, 116, 117, 118, 119});
  q.until = 63;
  q.limit = 8;
  CHECK(store.query(q).series.at(0).values == std::vector<double>{56, 57, 58, 59, 60, 61, 62, 63});
  // A step of a minute: the old rollup, then the new minute (its ticks: no rollup written yet).
  auto [ts, values] = stepped(store, 0, 119, 60, kiwi::Aggregate::mean, "x");
  CHECK(ts == std::vector<double>{0, 60});
  CHECK(values == std::vector<double>{29.5, 89.5});
  // Remote write reads across them too, in order, each tick once.
  auto raw = store.read_raw(57'000, 1000);
  REQUIRE(raw.size() == 62);
  CHECK(raw.front().ts_ms == 58'000);
  CHECK(raw[2].ts_ms == 60'000);
  CHECK(raw.back().ts_ms == 119'000);
  CHECK(store.ticks_after(57'000) == std::pair<std::uint64_t, std::int64_t>{62, 119'000});
  CHECK(store.ticks_after(64'500) == std::pair<std::uint64_t, std::int64_t>{55, 119'000});
  // Retention takes the old rows as it takes blocks, once their hour is over.
  append(store, 3'600'000, {metric("x", 0, "")}, false);
  store.flush(65'000, 1000);
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT count(*) FROM samples") == "0");
  CHECK(kiwi_test::rows_on_disk(db.path()) == 61);
}

TEST_CASE("store: a version-3 file's whole-minute rows read as group 0, then give way to hours") {
  TempDb db;
  const std::int64_t t0 = 1'764'460'800'000;
  const std::vector<std::string> keys = {"s1", "s70", "s140"};
  std::vector<kiwi::HistoryResult> before;
  auto answers = [&](const Store& s) {
    std::vector<kiwi::HistoryResult> out;
    for (auto& key : keys) {
      kiwi::HistoryQuery q;
      q.since = t0 / 1000.0;
      q.until = t0 / 1000.0 + 3 * 3600 - 1;
      q.step = 86.4;
      q.limit = 1000;
      q.patterns = {key};
      out.push_back(s.query(q));
    }
    return out;
  };
  // Ticks every 10 s in [from, to), a commit every 10 of them.
  auto fill = [&](Store& s, std::int64_t from, std::int64_t to) {
    for (std::int64_t ts = from; ts < to; ts += 10'000)
      append(s, ts, host_metrics(ts), (ts - t0) % 100'000 == 0);
  };
  {
    Store store(db.path());
    fill(store, t0, t0 + 3 * 3'600'000 + 60'000);  // three hours folded, a minute open
    store.close_current_minute();
    store.flush(0, 0);
    before = answers(store);
  }
  {
    // What an agent of schema 3 wrote: one row of every series per minute (from the hour rows
    // of this one), no hour rows.
    sqlite3* h;
    REQUIRE(sqlite3_open(db.path().c_str(), &h) == SQLITE_OK);
    std::map<std::int64_t, std::vector<std::pair<std::uint32_t, double>>> whole;
    sqlite3_stmt* st;
    sqlite3_prepare_v2(h, "SELECT ts, data FROM hours", -1, &st, nullptr);
    std::string buf;
    while (sqlite3_step(st) == SQLITE_ROW) {
      const std::int64_t ts = sqlite3_column_int64(st, 0);
      const std::int64_t hour = ts - ts % 3'600'000;
      const auto id = static_cast<std::uint32_t>(ts - hour);
      std::string_view stored(static_cast<const char*>(sqlite3_column_blob(st, 1)),
                              static_cast<std::size_t>(sqlite3_column_bytes(st, 1)));
      auto data = sample_codec::unpack(stored, buf);
      REQUIRE(data);
      sample_codec::decode(*data, [&](std::uint32_t key, double v) {
        if (id == 0)  // the minute map: minute -> first-sample offset (key 0 of its row)
          whole[hour + key * 60'000].emplace_back(0, v);
        else
          whole[hour + key / 5 * 60'000].emplace_back(id * 5 + key % 5, v);
      });
    }
    sqlite3_finalize(st);
    sqlite3_exec(h, "BEGIN; DELETE FROM rollups; DROP TABLE hours; DROP TABLE days", nullptr,
                 nullptr, nullptr);
    sqlite3_prepare_v2(h, "INSERT INTO rollups VALUES(?1, ?2)", -1, &st, nullptr);
    for (auto& [minute, values] : whole) {
      std::string blob;
      sample_codec::encode(blob, values);
      blob = sample_codec::pack_if_smaller(std::move(blob));
      sqlite3_bind_int64(st, 1, minute);
      sqlite3_bind_blob(st, 2, blob.data(), static_cast<int>(blob.size()), SQLITE_STATIC);
      REQUIRE(sqlite3_step(st) == SQLITE_DONE);
      sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    REQUIRE(sqlite3_exec(h, "COMMIT; PRAGMA user_version=3", nullptr, nullptr, nullptr) ==
            SQLITE_OK);
    sqlite3_close(h);
  }
  Store store(db.path());
  CHECK(kiwi_test::sqlite_value(db.path(), "PRAGMA user_version") == "6");
  const auto after = answers(store);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    INFO("series " << keys[i]);
    CHECK(after[i].timestamps == before[i].timestamps);
    REQUIRE(after[i].series.size() == 1);
    CHECK(same_values(after[i].series[0].values, before[i].series[0].values));
  }
  check_paths_agree(store, t0, t0 + 4 * 3'600'000, keys);
  // The hours it took over are folded from their ticks when the next hour begins; the same
  // answers from their hour rows.
  fill(store, t0 + 3 * 3'600'000 + 70'000, t0 + 4 * 3'600'000 + 120'000);
  store.flush(0, 0);
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT count(*) FROM hours WHERE ts % 3600000 = 0") ==
        "4");
  const auto folded = answers(store);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    INFO("series " << keys[i]);
    CHECK(folded[i].timestamps == before[i].timestamps);
    CHECK(same_values(folded[i].series[0].values, before[i].series[0].values));
  }
  check_paths_agree(store, t0, t0 + 5 * 3'600'000, keys);
}

TEST_CASE("store: transitions are numbered on from the last one, even once every one was sent") {
  TempDb db;
  std::uint64_t last = 0;
  {
    Store store(db.path());
    kiwi::AlertNotice n;
    n.name = "hot";
    store.log_alert_event(n);
    last = store.log_alert_event(n);
    store.flush(0, 0);
    store.forget_alert_events(last);  // every notifier has them
    store.flush(0, 0);
  }
  Store store(db.path());
  CHECK(store.alert_events_after(0, 10).size() <= 1);
  kiwi::AlertNotice n;
  n.name = "cold";
  CHECK(store.log_alert_event(n) == last + 1);
}
