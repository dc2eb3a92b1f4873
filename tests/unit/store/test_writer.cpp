// The writer (store/writer.hpp, store/rollup.cpp): the queue, commits, retention, minute summaries.
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <random>

#include "store_test_support.hpp"

using namespace kiwi::agent;
using namespace store_test;

TEST_CASE("store: retention hides old ticks at once and deletes the tick log's files whole") {
  TempDb db;
  Store store(db.path());
  for (int i = 0; i < 100; ++i) {  // ten commits of ten ticks: ten blocks
    append(store, i * 1000, {metric("a", i, "")}, false);
    if (i % 10 == 9) store.flush(0, 0);
  }
  CHECK(kiwi_test::ticks_in_log(db.path()) == 100);
  CHECK(log_hours(db.path()) == std::vector<std::int64_t>{0});
  kiwi::HistoryQuery q;
  q.limit = 1000;
  // Ticks of the hour in progress stay whatever the cutoff (its minutes are made again from them
  // after a restart): the next hour begins, so those go as the cutoff says.
  store.flush(50'000, 2);
  CHECK(store.query(q).timestamps.size() == 100);
  append(store, 3'600'000, {metric("a", 0, "")}, false);
  store.flush(50'000, 2);
  auto r = store.query(q);
  CHECK(r.timestamps.size() == 51);  // the blocks of 50-59 s on, and the new tick
  CHECK(r.timestamps.front() == 50);
  CHECK(store.read_raw(0, 1000).size() == 51);
  CHECK(store.ticks_after(0) == std::pair<std::uint64_t, std::int64_t>{51, 3'600'000});
  store.flush(54'000, 2);  // a block goes whole: 50-53 s stay until 59 s is old enough
  CHECK(store.query(q).timestamps.size() == 51);
  // The file stays while it may hold a tick not yet past the cutoff: a block that starts in its
  // hour may end 5 minutes after it.
  CHECK(kiwi_test::ticks_in_log(db.path()) == 101);
  append(store, 7'200'000, {metric("a", 0, "")}, false);
  store.flush(3'900'000, 2);
  CHECK(log_hours(db.path()) == std::vector<std::int64_t>{3'600'000, 7'200'000});
  CHECK(store.query(q).timestamps == std::vector<double>{7200});
  // A longer retention (a reload) finds again what is still on disk.
  store.flush(0, 2);
  CHECK(store.query(q).timestamps == std::vector<double>{3600, 7200});
}

TEST_CASE("store: queued samples are visible to queries before they reach the disk") {
  TempDb db;
  Store store(db.path());
  for (int i = 0; i < 3; ++i) append(store, i * 1000, {metric("a", i, "")});
  for (int i = 3; i < 6; ++i)
    append(store, i * 1000, {metric("a", i, ""), metric("b", 1, "")}, false);
  CHECK(kiwi_test::rows_on_disk(db.path()) == 3);
  kiwi::HistoryQuery q;
  q.limit = 4;
  auto r = store.query(q);
  CHECK(r.timestamps == std::vector<double>{2, 3, 4, 5});
  REQUIRE(r.series.size() == 2);
  CHECK(r.series[1].key == "b");  // a series that only exists in memory so far
  q.step = 2;
  q.since = 0;
  q.until = 10;
  q.limit = 100;
  CHECK(store.query(q).timestamps == std::vector<double>{0, 2, 4});
  store.flush(0, 0);
  CHECK(kiwi_test::rows_on_disk(db.path()) == 6);
  Store reopened(db.path());
  CHECK(reopened.series()->size() == 2);
}

TEST_CASE("store: a full disk loses nothing: samples stay queued until there is room again") {
  // A real full filesystem: a tiny tmpfs (needs root and CAP_SYS_ADMIN, as CI has here).
  TempDb db;
  kiwi_test::TinyFilesystem tiny(db.dir / "tiny", "128k");  // room for the tables' first pages
  if (!tiny.mounted())
    kiwi_test::skip_test("cannot mount a tmpfs here (needs root); full-disk test not run");
  const std::string path = (tiny.path() / "kiwi.db").string();
  Store store(path);
  std::vector<kiwi::MetricValue> wide;
  for (int s = 0; s < 50; ++s) wide.push_back(metric("m" + std::to_string(s), 0.5 + s, ""));
  std::string error;
  int t = 0;
  for (; t < 2000 && error.empty(); ++t) {
    append(store, t * 1000, wide, false);
    try {
      store.flush(0, 0);
    } catch (const kiwi::StoreError& e) {
      error = e.what();
    }
  }
  REQUIRE_THAT(error, Catch::Contains("full"));
  CHECK(store.pending_rows() >= 1);
  kiwi::HistoryQuery q;
  q.limit = 1;
  CHECK(store.query(q).timestamps ==
        std::vector<double>{static_cast<double>(t - 1)});  // still served
  REQUIRE(tiny.grow("4m"));
  store.flush(0, 0);
  CHECK(store.pending_rows() == 0);
  CHECK(kiwi_test::rows_on_disk(path) == static_cast<std::size_t>(t));  // every sample, none lost
}

TEST_CASE("store: pruning does not write out the pages it frees") {
  // Debian's SQLite zero-fills every freed page (secure_delete), one WAL frame each; the store
  // turns that off, so deleting old rows costs well under a frame per page freed. Shown on the
  // blocks of a version-5 file (new ticks go to the tick log; hour and day rows are pruned the
  // same way).
  TempDb db;
  {
    Store store(db.path());
    append(store, 0, {metric("m0", 0)});
  }
  const auto page = std::stoul(kiwi_test::sqlite_value(db.path(), "PRAGMA page_size"));
  {
    sqlite3* h = nullptr;
    REQUIRE(sqlite3_open(db.path().c_str(), &h) == SQLITE_OK);
    std::minstd_rand rng(39);  // bytes of no pattern: 40 blocks of about two pages each
    std::string sql = "BEGIN;";
    for (int b = 0; b < 40; ++b) {
      std::string hex;
      for (std::size_t i = 0; i < page * 7 / 4; ++i) hex += "0123456789ABCDEF"[rng() % 16];
      sql += "INSERT INTO blocks VALUES(" + std::to_string(1000 + b * 10'000) + ", " +
             std::to_string(1000 + b * 10'000 + 9000) + ", 10, X'" + hex + hex + "');";
    }
    sql += "COMMIT; PRAGMA user_version=5;";
    REQUIRE(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(h);
  }
  Store store(db.path());
  append(store, 3'600'000, {metric("m0", 0)});  // the hour is over: its ticks may go
  const auto wal_frames = [&] { return fs::file_size(db.path() + "-wal") / (page + 24); };
  const auto before = wal_frames();
  store.flush(201'000, 200);  // half of them go (20 blocks)
  const auto written = wal_frames() - before;
  const auto freed = std::stoul(kiwi_test::sqlite_value(db.path(), "PRAGMA freelist_count"));
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT count(*) FROM blocks") == "20");
  INFO("pruning freed " << freed << " pages and wrote " << written << " WAL frames");
  CHECK(freed >= 30);
  CHECK(written * 4 < freed * 3);
}

TEST_CASE("store: a restart inside a minute keeps that minute's samples in its rollup") {
  TempDb db;
  const std::int64_t t0 = 1'764'475'800'000;  // a whole minute
  const double m0 = t0 / 1000.0, m1 = m0 + 60;
  using A = kiwi::Aggregate;
  {  // the first run: a = 1 and b = 10 for 8 s, then stopped as the collector stops
    Store store(db.path());
    for (int i = 0; i < 8; ++i)
      append(store, t0 + i * 1000, {metric("a", 1, ""), metric("b", 10, "")}, i == 3);
    store.close_current_minute();
    store.flush(0, 0);
  }
  // A minute's summary is written with its hour's rows; until then it is made from the ticks.
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT COUNT(*) FROM rollups") == "0");
  {  // restarted in the same minute: a new series first (c), then a = 5 for 8 s; no b
    Store store(db.path());
    for (int i = 10; i < 18; ++i)
      append(store, t0 + i * 1000, {metric("c", 7, ""), metric("a", 5, "")}, i == 12);
    // While the minute is still open, its stored partial summary does not hide the new samples.
    CHECK(stepped(store, m0, m0 + 59, 60, A::mean, "a").second == std::vector<double>{3});
    CHECK(stepped(store, m0, m0 + 59, 60, A::min, "a").second == std::vector<double>{1});
    store.close_current_minute();
    store.flush(0, 0);
    CHECK(stepped(store, m0, m0 + 59, 60, A::mean, "a").second == std::vector<double>{3});
  }
  {  // read back after a restart
    Store store(db.path());
    auto mean = stepped(store, m0, m0 + 59, 60, A::mean, "a");
    CHECK(mean.first == std::vector<double>{m0});
    CHECK(mean.second == std::vector<double>{3});
    CHECK(stepped(store, m0, m0 + 59, 60, A::min, "a").second == std::vector<double>{1});
    CHECK(stepped(store, m0, m0 + 59, 60, A::max, "a").second == std::vector<double>{5});
    CHECK(stepped(store, m0, m0 + 59, 60, A::last, "a").second == std::vector<double>{5});
    // Series of only one run keep their values under their own ids.
    CHECK(stepped(store, m0, m0 + 59, 60, A::mean, "b").second == std::vector<double>{10});
    CHECK(stepped(store, m0, m0 + 59, 60, A::last, "c").second == std::vector<double>{7});
    // A restart into a new minute leaves the old one as it was.
    for (int i = 0; i < 8; ++i) append(store, t0 + 60'000 + i * 1000, {metric("a", 9, "")}, false);
    store.close_current_minute();
    store.flush(0, 0);
  }
  Store store(db.path());
  // The hour is over: its rows hold both minutes, the first with the samples of both runs.
  const std::int64_t next_hour = t0 - t0 % 3'600'000 + 3'600'000;
  append(store, next_hour, {metric("a", 0, "")});
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT COUNT(*) FROM hours WHERE ts % 3600000 = 0") ==
        "1");
  auto mean = stepped(store, m0, m1 + 59, 60, A::mean, "a");
  CHECK(mean.first == std::vector<double>{m0, m1});
  CHECK(mean.second == std::vector<double>{3, 9});
  CHECK(stepped(store, m0, m1 + 59, 60, A::min, "a").second == std::vector<double>{1, 9});
  CHECK(stepped(store, m0, m1 + 59, 60, A::max, "a").second == std::vector<double>{5, 9});
  CHECK(stepped(store, m0, m1 + 59, 60, A::last, "a").second == std::vector<double>{5, 9});
  // The first minute still counts 16 samples: (16 x 3 + 8 x 9) / 24 = 5.
  CHECK(stepped(store, m0, m1 + 59, 120, A::mean, "a").second == std::vector<double>{5});
}

TEST_CASE("store: a minute cut short by a crash is summarised with its committed samples") {
  TempDb db;
  const std::int64_t t0 = 1'764'475'800'000;
  {  // killed after a commit: no close_current_minute(), no rollup row for the minute
    Store store(db.path());
    for (int i = 0; i < 8; ++i) append(store, t0 + i * 1000, {metric("a", 1, "")}, false);
    store.flush(0, 0);
  }
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT COUNT(*) FROM rollups") == "0");
  {
    Store store(db.path());
    for (int i = 10; i < 18; ++i) append(store, t0 + i * 1000, {metric("a", 5, "")}, false);
    store.close_current_minute();
    store.flush(0, 0);
  }
  Store store(db.path());
  CHECK(stepped(store, t0 / 1000.0, t0 / 1000.0 + 59, 60, kiwi::Aggregate::mean, "a").second ==
        std::vector<double>{3});
}
