#include <sqlite3.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "emulator.hpp"
#include "store/reader.hpp"
#include "store/sample_codec.hpp"
#include "store/store.hpp"
#include "test_support.hpp"

#include <kiwi/glob.hpp>

using namespace kiwi::agent;
namespace fs = std::filesystem;

namespace {
using kiwi_test::TempDb;

kiwi::MetricValue metric(std::string name, double v, std::string unit = "ratio",
                         std::vector<std::pair<std::string, std::string>> labels = {}) {
  return {std::move(name), std::move(labels), v, std::move(unit), kiwi::MetricKind::gauge};
}

void append(Store& s, std::int64_t ts, const std::vector<kiwi::MetricValue>& ms,
            bool flush = true) {
  std::vector<const kiwi::MetricValue*> ptrs;
  for (auto& m : ms) ptrs.push_back(&m);
  s.append(ts, ptrs);
  if (flush) s.flush(0, 0);
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const kiwi::HistorySeries* find(const kiwi::HistoryResult& r, const std::string& key) {
  for (auto& s : r.series)
    if (s.key == key) return &s;
  return nullptr;
}
}  // namespace

TEST_CASE("store: the latest N samples come back oldest first, as columns") {
  TempDb db;
  Store store(db.path());
  for (int i = 0; i < 10; ++i)
    append(store, 1'000'000 + i * 1000,
           {metric("cpu_usage_ratio", 0.25 + i / 100.0),
            metric("memory_total_bytes", 8300695552.0, "bytes"),
            metric("cpu_core_usage_ratio", 0.5, "ratio", {{"core", "3"}})});
  kiwi::HistoryQuery q;
  q.limit = 3;
  auto r = store.query(q);
  REQUIRE(r.timestamps == std::vector<double>{1007.0, 1008.0, 1009.0});
  REQUIRE(r.series.size() == 3);
  CHECK(r.series[0].key == "cpu_usage_ratio");
  CHECK(r.series[0].unit == "ratio");
  CHECK(r.series[0].values == std::vector<double>{0.32, 0.33, 0.34});  // float32, shortest decimal
  auto* mem = find(r, "memory_total_bytes");
  REQUIRE(mem);
  CHECK(mem->values[2] == 8300695552.0);  // integral values are exact
  auto* core = find(r, "cpu_core_usage_ratio{core=\"3\"}");
  REQUIRE(core);
  CHECK(core->labels == std::vector<std::pair<std::string, std::string>>{{"core", "3"}});
}

TEST_CASE("store: a series missing from a sample is null (NaN) in that row") {
  TempDb db;
  Store store(db.path());
  append(store, 1000, {metric("a", 1, "")});
  append(store, 2000, {metric("a", 2, ""), metric("b", 5, "")});
  auto r = store.query({});
  REQUIRE(r.series.size() == 2);
  CHECK(std::isnan(r.series[1].values[0]));
  CHECK(r.series[1].values[1] == 5);
}

TEST_CASE("store: series that change places, labels or order between ticks keep their own ids") {
  // Each tick's series are first looked for where they were the tick before; none may take the
  // id of the one that was there.
  TempDb db;
  Store store(db.path());
  append(store, 1000, {metric("a", 1, ""), metric("b", 2, ""), metric("c", 3, "", {{"x", "1"}})});
  append(store, 2000,
         {metric("b", 20, ""), metric("a", 10, ""), metric("c", 30, "", {{"x", "2"}})});
  append(store, 3000,
         {metric("a", 100, ""), metric("c", 300, "", {{"x", "1"}}),
          metric("c", 301, "", {{"x", "1"}, {"y", "1"}})});
  append(store, 4000, {metric("a", 1000, "")});
  auto r = store.query({});
  REQUIRE(r.timestamps.size() == 4);
  auto values = [&](const std::string& key) {
    auto* s = find(r, key);
    REQUIRE(s);
    std::vector<std::string> out;
    for (double v : s->values) out.push_back(std::isnan(v) ? "-" : std::to_string(int(v)));
    return out;
  };
  using V = std::vector<std::string>;
  CHECK(values("a") == V{"1", "10", "100", "1000"});
  CHECK(values("b") == V{"2", "20", "-", "-"});
  CHECK(values("c{x=\"1\"}") == V{"3", "-", "300", "-"});
  CHECK(values("c{x=\"2\"}") == V{"-", "30", "-", "-"});
  CHECK(values("c{x=\"1\",y=\"1\"}") == V{"-", "-", "301", "-"});
  CHECK(r.series.size() == 5);
}

TEST_CASE("store: since/until and series globs select rows and columns") {
  TempDb db;
  Store store(db.path());
  for (int i = 0; i < 5; ++i)
    append(store, i * 1000,
           {metric("cpu_usage_ratio", 0.5), metric("memory_used_bytes", i, "bytes")});
  kiwi::HistoryQuery q;
  q.since = 1;
  q.until = 3;
  q.patterns = {"cpu_*"};
  auto r = store.query(q);
  CHECK(r.timestamps == std::vector<double>{1, 2, 3});
  REQUIRE(r.series.size() == 1);
  CHECK(r.series[0].name == "cpu_usage_ratio");
}

TEST_CASE("store: history and series survive a reopen") {
  TempDb db;
  {
    Store store(db.path());
    append(store, 1000, {metric("x", 1.5, "celsius", {{"sensor", "soc-thermal"}})});
  }
  Store store(db.path());
  append(store, 2000,
         {metric("x", 2.5, "celsius", {{"sensor", "soc-thermal"}}), metric("y", 1, "")});
  auto r = store.query({});
  REQUIRE(r.series.size() == 2);
  CHECK(r.series[0].key == "x{sensor=\"soc-thermal\"}");
  CHECK(r.series[0].values == std::vector<double>{1.5, 2.5});
}

TEST_CASE("store: retention deletes old samples in small steps, a commit's block at a time") {
  TempDb db;
  Store store(db.path());
  for (int i = 0; i < 100; ++i) {  // ten commits of ten ticks: ten blocks
    append(store, i * 1000, {metric("a", i, "")}, false);
    if (i % 10 == 9) store.flush(0, 0);
  }
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT count(*) FROM blocks") == "10");
  store.flush(50'000, 2);
  CHECK(kiwi_test::rows_on_disk(db.path()) == 80);  // a step, not everything at once
  store.flush(50'000, 2);
  CHECK(kiwi_test::rows_on_disk(db.path()) == 60);
  store.flush(50'000, 2);  // the block of 40-49 s; 50-59 s is not older than 50 s
  CHECK(kiwi_test::rows_on_disk(db.path()) == 50);
  store.flush(54'000, 2);  // a block goes whole: 50-53 s stay until 59 s is old enough
  CHECK(kiwi_test::rows_on_disk(db.path()) == 50);
  kiwi::HistoryQuery q;
  q.limit = 1000;
  auto r = store.query(q);
  CHECK(r.timestamps.size() == 50);
  CHECK(r.timestamps.front() == 50);
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
  kiwi_test::TinyFilesystem tiny(db.dir / "tiny", "64k");
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

TEST_CASE("store: the read-only connection refuses writes") {
  TempDb db;
  Store store(db.path());
  append(store, 1000, {metric("a", 1, "")});
  ReadConnection reader(db.path());
  CHECK(reader.db().try_exec("DELETE FROM samples") == SQLITE_READONLY);
  CHECK(store.query({}).timestamps.size() == 1);
}

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
  {
    Store store(db.path());
    for (int t = 0; t < 200; ++t) append(store, t * 1000, wide_at(t), t % 10 == 9);
    store.flush(0, 0);
  }
  REQUIRE(fs::file_size(db.path()) > 20 * 1024);
  scribble(db.path(), 12 * 1024, 2048, 16);  // dd bs=1024 seek=12 count=2, deterministic
  const std::string damaged = slurp(db.path());
  SECTION("the collector asks, and flushes once the check has found it") {
    Store store(db.path());
    CHECK(store.recoveries() == 0);  // opened: the check runs on a thread of its own
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!store.damage_found() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    REQUIRE(store.damage_found());
    CHECK(slurp(db.path()) == damaged);  // nothing written to it meanwhile
    append(store, 300'000, wide);        // the flush moves it aside and commits to a new file
    CHECK(store.recoveries() == 1);
    CHECK_THAT(store.recovery_note(),
               Catch::Contains("quick_check") && Catch::Contains("new history started"));
    CHECK_FALSE(store.damage_found());  // the new file's
    CHECK(kiwi_test::rows_on_disk(db.path()) == 1);
    CHECK(store.series()->size() == 50);  // ids kept: the catalog is in memory
  }
  SECTION("a flush before the check has finished waits for its verdict") {
    Store store(db.path());
    append(store, 300'000, wide);
    CHECK(store.recoveries() == 1);
    CHECK(kiwi_test::rows_on_disk(db.path()) == 1);
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
  CHECK(kiwi_test::rows_on_disk(db.path()) == 2);
  kiwi::HistoryQuery q;
  q.patterns = {"late", "m3"};
  auto r = store.query(q);
  CHECK(r.timestamps == std::vector<double>{301, 302});
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

TEST_CASE("store: times far outside the int64 range of milliseconds are clamped, not cast") {
  TempDb db;
  Store store(db.path());
  append(store, 1000, {metric("a", 1, "")});
  append(store, 2000, {metric("a", 2, "")});
  kiwi::HistoryQuery q;
  q.limit = 86400;
  q.since = 179599900000000999.5;  // found by fuzzing: UB before
  CHECK(store.query(q).timestamps.empty());
  q.since = -1e300;
  q.until = 1e300;
  CHECK(store.query(q).timestamps.size() == 2);
  q.since = std::nan("");
  q.until = std::nan("");
  CHECK(store.query(q).timestamps.empty());
  q.since.reset();
  q.until = 1e300;
  q.step = 1e300;
  q.limit = 10;
  auto r = store.query(q);
  REQUIRE(r.timestamps.size() == 1);
  REQUIRE(r.series.size() == 1);
  CHECK(r.series[0].values[0] == 1.5);
}

TEST_CASE("store: the catalog lists every series once, in id order, across chunks and reopens") {
  TempDb db;
  const std::size_t n = 3 * SeriesCatalog::kChunk + 7;
  std::vector<kiwi::MetricValue> ms;
  for (std::size_t i = 0; i < n; ++i)
    ms.push_back(metric("s", static_cast<double>(i), "", {{"i", std::to_string(i)}}));
  Store::Catalog early;
  {
    Store store(db.path());
    append(store, 1000, {ms[0]});
    early = store.series();
    append(store, 2000, ms);
    append(store, 3000, ms);  // known series: no new entries
    auto c = store.series();
    REQUIRE(c->size() == n);
    std::size_t i = 0;
    for (auto& s : *c) CHECK(s.key == "s{i=\"" + std::to_string(i++) + "\"}");
    CHECK(early->size() == 1);  // a view taken before stays as it was
    CHECK((*early)[0].key == "s{i=\"0\"}");
  }
  Store again(db.path());
  auto c = again.series();
  REQUIRE(c->size() == n);
  CHECK((*c)[n - 1].key == "s{i=\"" + std::to_string(n - 1) + "\"}");
  CHECK((*c)[SeriesCatalog::kChunk].labels[0].second == std::to_string(SeriesCatalog::kChunk));
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

TEST_CASE("store: sample encoding round-trips integers exactly and others to float precision") {
  std::vector<std::pair<std::uint32_t, double>> in = {
      {7, 8300695552.0}, {1, 0.123456789}, {3, -40.5}, {2, 1e300}, {4, 0}, {5, -3}};
  std::string blob;
  sample_codec::encode(blob, in);
  std::vector<std::pair<std::uint32_t, double>> out;
  sample_codec::decode(blob, [&](std::uint32_t id, double v) { out.emplace_back(id, v); });
  REQUIRE(out.size() == 6);
  CHECK(out[0] == std::pair<std::uint32_t, double>{1, 0.12345679});
  CHECK(out[1] == std::pair<std::uint32_t, double>{2, 1e300});
  CHECK(out[2] == std::pair<std::uint32_t, double>{3, -40.5});
  CHECK(out[5] == std::pair<std::uint32_t, double>{7, 8300695552.0});
  CHECK(blob.size() < 40);  // compact: ~100 values a tick must stay small on flash
  CHECK_THROWS_AS(sample_codec::decode(std::string_view("\x05", 1), [](auto, auto) {}),
                  kiwi::StoreError);
}

TEST_CASE("glob matching") {
  CHECK(kiwi::glob_match("cpu_*", "cpu_usage_ratio"));
  CHECK(kiwi::glob_match("*_bytes", "memory_total_bytes"));
  CHECK(kiwi::glob_match("*", ""));
  CHECK(kiwi::glob_match("a*b*c", "aXXbYYc"));
  CHECK_FALSE(kiwi::glob_match("cpu_*", "memory_total_bytes"));
  CHECK_FALSE(kiwi::glob_match("cpu", "cpu_usage_ratio"));
}

TEST_CASE("name filter: included by a glob and not excluded, exclusion wins") {
  const kiwi::NameFilter f({"eth*", "wlan0"}, {"eth9*"});
  CHECK(f.passes("eth0"));
  CHECK(f.passes("wlan0"));
  CHECK_FALSE(f.passes("wlan1"));                        // not included
  CHECK_FALSE(f.passes("eth99"));                        // excluded, though included
  CHECK_FALSE(kiwi::NameFilter({}, {}).passes("eth0"));  // an empty include list: nothing
  // Another matcher: path prefixes, as the storage sensor's mount options use.
  const kiwi::NameFilter paths(
      {"/"}, {"/proc"}, [](std::string_view p, std::string_view n) { return n.starts_with(p); });
  CHECK(paths.passes("/home"));
  CHECK_FALSE(paths.passes("/proc/sys"));
}

TEST_CASE("store: step folds samples into aligned buckets with mean, max, min or last") {
  TempDb db;
  Store store(db.path());
  for (int i = 0; i < 10; ++i) {
    std::vector<kiwi::MetricValue> ms = {metric("a", i, "")};
    if (i < 5) ms.push_back(metric("b", 100 + i, ""));  // b stops after the first bucket
    append(store, 1'000'000 + i * 1000, ms);
  }
  kiwi::HistoryQuery q;
  q.since = 1000;
  q.until = 1009;
  q.step = 5;
  q.limit = 100;
  auto check = [&](kiwi::Aggregate agg, std::vector<double> a) {
    q.aggregate = agg;
    auto r = store.query(q);
    CHECK(r.timestamps == std::vector<double>{1000, 1005});
    REQUIRE(r.series.size() == 2);
    CHECK(r.series[0].values == a);
    CHECK(std::isnan(r.series[1].values[1]));  // no b in the second bucket
    return r;
  };
  check(kiwi::Aggregate::mean, {2, 7});
  check(kiwi::Aggregate::max, {4, 9});
  check(kiwi::Aggregate::min, {0, 5});
  CHECK(check(kiwi::Aggregate::last, {4, 9}).series[1].values[0] == 104);
  q.limit = 1;  // the latest bucket only; b has no value there and is left out
  q.aggregate = kiwi::Aggregate::mean;
  auto latest = store.query(q);
  CHECK(latest.timestamps == std::vector<double>{1005});
  CHECK(latest.series.size() == 1);
}

TEST_CASE("store: steps of a minute or more read per-minute rollups, with the same answers") {
  TempDb db;
  Store store(db.path());
  // Three minutes of 1 Hz samples; a's value is its second within the minute (0..59).
  const std::int64_t t0 = 1'764'475'800'000;  // a whole minute
  for (int i = 0; i < 180; ++i)
    append(store, t0 + i * 1000, {metric("a", i % 60, ""), metric("b", i, "")}, i % 7 == 0);
  store.flush(0, 0);  // minutes 1 and 2 are rolled up; minute 3 is in progress (raw rows)
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT COUNT(*) FROM rollups") == "2");
  kiwi::HistoryQuery q;
  q.since = t0 / 1000;
  q.until = t0 / 1000 + 180;
  q.step = 60;
  q.limit = 100;
  auto check = [&](kiwi::Aggregate agg, std::vector<double> a, std::vector<double> b) {
    q.aggregate = agg;
    auto r = store.query(q);
    CHECK(r.timestamps == std::vector<double>{1764475800, 1764475860, 1764475920});
    REQUIRE(r.series.size() == 2);
    CHECK(r.series[0].values == a);
    CHECK(r.series[1].values == b);
  };
  check(kiwi::Aggregate::mean, {29.5, 29.5, 29.5}, {29.5, 89.5, 149.5});
  check(kiwi::Aggregate::max, {59, 59, 59}, {59, 119, 179});
  check(kiwi::Aggregate::min, {0, 0, 0}, {0, 60, 120});
  check(kiwi::Aggregate::last, {59, 59, 59}, {59, 119, 179});
  // Two-minute buckets combine rollups weighted by their sample counts.
  q.step = 120;
  q.aggregate = kiwi::Aggregate::mean;
  auto two = store.query(q);
  CHECK(two.timestamps == std::vector<double>{1764475800, 1764475920});
  CHECK(two.series[1].values == std::vector<double>{59.5, 149.5});
  // The minute in progress is summarised at shutdown, so it is a rollup after a restart.
  store.close_current_minute();
  store.flush(0, 0);
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT COUNT(*) FROM rollups") == "3");
}

TEST_CASE("store: a version-1 database is taken over: its rows still read, new ticks in blocks") {
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
  // Marked version 4, so an older agent refuses the file instead of missing the new ticks.
  CHECK(kiwi_test::sqlite_value(db.path(), "PRAGMA user_version") == "4");
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT count(*) FROM samples") == "1");  // as it was
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT ticks FROM blocks WHERE ts = 2000") == "1");
  const char* first_byte = "SELECT hex(substr(data, 1, 1)) FROM blocks WHERE ts = 2000";
  CHECK(kiwi_test::sqlite_value(db.path(), first_byte) == "00");  // too small to deflate
  Store again(db.path());
  CHECK(again.query({}).series[0].values == std::vector<double>{1.5, 2.5});
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

TEST_CASE("store: pruning does not write out the pages it frees") {
  // Debian's SQLite zero-fills every freed page (secure_delete), one WAL frame each; the store
  // turns that off, so deleting old rows costs well under a frame per page freed.
  TempDb db;
  Store store(db.path());
  for (int i = 0; i < 400; ++i) {
    std::vector<kiwi::MetricValue> ms;
    for (int j = 0; j < 40; ++j)
      ms.push_back(metric("m" + std::to_string(j), ((i * 7919 + j * 104729) % 100003) / 7.0));
    append(store, i * 1000, ms, false);
    if (i % 10 == 9) store.flush(0, 0);  // 40 blocks of about two pages each
  }
  const auto wal_frames = [&] { return fs::file_size(db.path() + "-wal") / (1024 + 24); };
  const auto before = wal_frames();
  store.flush(200'000, 200);  // half of them go (20 blocks)
  const auto written = wal_frames() - before;
  const auto freed = std::stoul(kiwi_test::sqlite_value(db.path(), "PRAGMA freelist_count"));
  CHECK(kiwi_test::rows_on_disk(db.path()) == 200);
  INFO("pruning freed " << freed << " pages and wrote " << written << " WAL frames");
  CHECK(freed >= 30);
  CHECK(written * 4 < freed * 3);
}

namespace {
// The values of `key` in a step query over [since_s, until_s], with the bucket timestamps.
std::pair<std::vector<double>, std::vector<double>> stepped(const Store& store, double since_s,
                                                            double until_s, double step,
                                                            kiwi::Aggregate agg,
                                                            const std::string& key) {
  kiwi::HistoryQuery q;
  q.since = since_s;
  q.until = until_s;
  q.step = step;
  q.aggregate = agg;
  q.limit = 100;
  auto r = store.query(q);
  auto* s = find(r, key);
  return {r.timestamps, s ? s->values : std::vector<double>{}};
}
}  // namespace

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
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT COUNT(*) FROM rollups") == "1");
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
  {  // read back from the merged rollup only
    Store store(db.path());
    CHECK(kiwi_test::sqlite_value(db.path(), "SELECT COUNT(*) FROM rollups") == "1");
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
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT COUNT(*) FROM rollups") == "2");
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

TEST_CASE("store: with a step and no since, limit keeps the latest buckets that hold data") {
  TempDb db;
  Store store(db.path());
  for (int i = 0; i < 5; ++i) append(store, 1'000'000 + i * 1000, {metric("a", i, "")});
  for (int i = 0; i < 2; ++i) append(store, 2'000'000 + i * 1000, {metric("a", 10 + i, "")}, false);
  kiwi::HistoryQuery q;
  q.step = 0.5;  // finer than the samples: every other bucket is empty
  q.limit = 3;
  auto r = store.query(q);
  CHECK(r.timestamps == std::vector<double>{1004, 2000, 2001});  // across the gap, queue included
  CHECK(r.series.at(0).values == std::vector<double>{4, 10, 11});
  q.limit = 100;  // more than there are: everything
  CHECK(store.query(q).timestamps.size() == 7);
  q.step = 1;
  q.limit = 4;
  q.until = 1003;
  CHECK(store.query(q).timestamps == std::vector<double>{1000, 1001, 1002, 1003});
  TempDb empty;
  CHECK(Store(empty.path()).query(q).timestamps.empty());
}

TEST_CASE("store: a bucket is labelled with its start, or with its first sample if that is later") {
  TempDb db;
  Store store(db.path());
  for (int i = 2; i < 10; ++i) append(store, 1'000'000 + i * 1000, {metric("a", i, "")}, false);
  for (int i = 21; i < 23; ++i) append(store, 1'000'000 + i * 1000, {metric("a", i, "")}, false);
  kiwi::HistoryQuery q;
  q.since = 1000;
  q.until = 1030;
  q.step = 5;
  q.limit = 100;
  // The first samples (1002), the first after a gap (1021); buckets filled from the one before
  // keep their start (1005).
  CHECK(store.query(q).timestamps == std::vector<double>{1002, 1005, 1021});
  q.since = 1003.5;  // never before since either
  CHECK(store.query(q).timestamps == std::vector<double>{1004, 1005, 1021});
}

TEST_CASE("store: rollup buckets know their first sample, a minute begun before since reads raw") {
  TempDb db;
  Store store(db.path());
  const std::int64_t t0 = 1'764'475'800'000;  // a whole minute; the agent starts 30 s into it
  for (int i = 30; i < 180; ++i) append(store, t0 + i * 1000, {metric("a", i % 60, "")}, false);
  store.flush(0, 0);
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT COUNT(*) FROM rollups") == "2");
  const double m0 = t0 / 1000.0;
  auto all = stepped(store, m0 - 600, m0 + 180, 60, kiwi::Aggregate::mean, "a");
  CHECK(all.first == std::vector<double>{m0 + 30, m0 + 60, m0 + 120});
  CHECK(all.second == std::vector<double>{44.5, 29.5, 29.5});
  // since inside the first minute, after its first sample: that minute comes from its samples.
  auto late = stepped(store, m0 + 45, m0 + 180, 60, kiwi::Aggregate::mean, "a");
  CHECK(late.first == std::vector<double>{m0 + 45, m0 + 60, m0 + 120});
  CHECK(late.second == std::vector<double>{52, 29.5, 29.5});
  // since at its first sample: the rollup serves it (as a chart's refresh from its last label).
  CHECK(stepped(store, m0 + 30, m0 + 180, 60, kiwi::Aggregate::mean, "a").second ==
        std::vector<double>{44.5, 29.5, 29.5});
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
  CHECK(kiwi_test::sqlite_value(db.path(), "PRAGMA user_version") == "4");
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
  // Retention takes the old rows as it takes blocks.
  store.flush(65'000, 1000);
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT count(*) FROM samples") == "0");
  CHECK(kiwi_test::rows_on_disk(db.path()) == 60);
}

namespace {
// Whether two history answers are the same, NaN (no data) equal to NaN.
bool same_values(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  return true;
}

// Every query of `keys` one at a time (the per-series path: hour rows, minute rows by key) gives
// what the query of every series (every row of every minute) gives for that series.
void check_paths_agree(const Store& store, std::int64_t from_ms, std::int64_t to_ms,
                       const std::vector<std::string>& keys) {
  const double from = from_ms / 1000.0, to = to_ms / 1000.0;
  struct Window {
    double since, until, step;
  };
  const std::vector<Window> windows = {
      {from, to, 60},          {from, to, 86.4},           {from + 1830.5, to - 700, 300},
      {from, to, 3600},        {from + 7, to - 7, 60},     {from + 3599, from + 3 * 3600 + 61, 120},
      {from - 86400, to, 900}, {from + 5400, to + 100, 60}};
  for (auto& w : windows)
    for (auto agg : {kiwi::Aggregate::mean, kiwi::Aggregate::min, kiwi::Aggregate::max,
                     kiwi::Aggregate::last}) {
      kiwi::HistoryQuery q;
      q.since = w.since;
      q.until = w.until;
      q.step = w.step;
      q.aggregate = agg;
      q.limit = 1000;
      const auto wide = store.query(q);
      REQUIRE(wide.series.size() > Store::kNarrowSeries);
      for (auto& key : keys) {
        q.patterns = {key};
        const auto narrow = store.query(q);
        INFO("series " << key << ", since " << w.since << ", until " << w.until << ", step "
                       << w.step << ", aggregate " << static_cast<int>(agg));
        CHECK(narrow.timestamps == wide.timestamps);
        auto* a = find(wide, key);
        auto* b = find(narrow, key);
        REQUIRE((a == nullptr) == (b == nullptr));
        if (a) CHECK(same_values(a->values, b->values));
      }
      q.patterns.clear();
    }
}

// 150 series (three groups of rollup rows); values vary with the tick and the series.
std::vector<kiwi::MetricValue> host_metrics(std::int64_t ts, int n = 150) {
  std::vector<kiwi::MetricValue> out;
  for (int i = 0; i < n; ++i)
    out.push_back(metric("s" + std::to_string(i),
                         static_cast<double>((ts / 1000 + i * 7) % 97) / 8.0 + i, ""));
  return out;
}
}  // namespace

TEST_CASE("store: a query of a few series (hour rows) answers as the query of every series does") {
  TempDb db;
  const std::int64_t t0 = 1'764'460'800'000;  // a whole hour
  const std::vector<std::string> keys = {"s0", "s62", "s63", "s64", "s130", "s149"};
  auto fill = [&](Store& s, std::int64_t from, std::int64_t to) {
    for (std::int64_t ts = from; ts < to; ts += 5000)
      append(s, ts, host_metrics(ts), (ts - from) % 50'000 == 0);  // a commit every 10 ticks
    s.flush(0, 0);
  };
  {
    Store store(db.path());
    fill(store, t0 + 2000, t0 + 2 * 3'600'000 + 1'234'000);  // two closed hours, one open
    store.close_current_minute();
    store.flush(0, 0);
  }
  // Two hours folded; the open hour's minutes in rows of 64 series (3 per minute).
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT count(*) FROM hours WHERE ts % 3600000 = 0") ==
        "2");
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT count(*) FROM hours") == "302");
  CHECK(kiwi_test::sqlite_value(db.path(), ("SELECT count(*) FROM rollups WHERE ts >= " +
                                            std::to_string(t0 + 2 * 3'600'000))
                                               .c_str()) == "63");
  {
    // Restarted inside the minute it stopped in, then down for 90 minutes (the hour it left is
    // folded on the first minute after), then the clock goes back into a folded hour.
    Store store(db.path());
    fill(store, t0 + 2 * 3'600'000 + 1'236'000, t0 + 2 * 3'600'000 + 1'500'000);
    check_paths_agree(store, t0, t0 + 6 * 3'600'000, keys);  // with a minute open
    store.close_current_minute();
    store.flush(0, 0);
    fill(store, t0 + 4 * 3'600'000 + 1'800'000, t0 + 5 * 3'600'000 + 120'000);
    CHECK(kiwi_test::sqlite_value(db.path(), "SELECT count(*) FROM hours WHERE ts % 3600000 = 0") ==
          "4");
    fill(store, t0 + 3'600'000 + 600'500, t0 + 3'600'000 + 900'000);  // clock back 4 h
    // The hour it went back into is open again (its hour rows gone), the one it left folded.
    CHECK(
        kiwi_test::sqlite_value(
            db.path(),
            ("SELECT count(*) FROM hours WHERE ts = " + std::to_string(t0 + 3'600'000)).c_str()) ==
        "0");
    check_paths_agree(store, t0, t0 + 6 * 3'600'000, keys);
    store.close_current_minute();
    fill(store, t0 + 5 * 3'600'000 + 130'000, t0 + 5 * 3'600'000 + 200'000);  // and forward
    CHECK(
        kiwi_test::sqlite_value(
            db.path(),
            ("SELECT count(*) FROM hours WHERE ts = " + std::to_string(t0 + 3'600'000)).c_str()) ==
        "1");
    check_paths_agree(store, t0, t0 + 6 * 3'600'000, keys);
    // Retention: an hour's rows go when the hour starts before the cutoff; the minutes left of
    // it are read from their minute rows.
    // A commit prunes one hour's rows: with two behind, the minute rows of the second stay.
    store.flush(t0 + 3'600'000 + 1'800'000, 1000);
    check_paths_agree(store, t0, t0 + 6 * 3'600'000, keys);
    store.flush(t0 + 3'600'000 + 1'800'000, 1000);
    CHECK(kiwi_test::sqlite_value(db.path(), ("SELECT count(*) FROM hours WHERE ts < " +
                                              std::to_string(t0 + 2 * 3'600'000))
                                                 .c_str()) == "0");
    check_paths_agree(store, t0, t0 + 6 * 3'600'000, keys);
  }
  Store store(db.path());
  check_paths_agree(store, t0, t0 + 6 * 3'600'000, keys);
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
      q.until = t0 / 1000.0 + 3 * 3600;
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
    fill(store, t0, t0 + 2 * 3'600'000 + 600'000);
    store.close_current_minute();
    store.flush(0, 0);
    before = answers(store);
  }
  {
    // What an agent of schema 3 wrote: one row of every series per minute, no hour rows.
    sqlite3* h;
    REQUIRE(sqlite3_open(db.path().c_str(), &h) == SQLITE_OK);
    std::map<std::int64_t, std::vector<std::pair<std::uint32_t, double>>> whole;
    sqlite3_stmt* st;
    sqlite3_prepare_v2(h, "SELECT ts, data FROM rollups", -1, &st, nullptr);
    std::string buf;
    while (sqlite3_step(st) == SQLITE_ROW) {
      const std::int64_t ts = sqlite3_column_int64(st, 0);
      std::string_view stored(static_cast<const char*>(sqlite3_column_blob(st, 1)),
                              static_cast<std::size_t>(sqlite3_column_bytes(st, 1)));
      auto data = sample_codec::unpack(stored, buf);
      REQUIRE(data);
      sample_codec::decode(*data, [&](std::uint32_t key, double v) {
        whole[ts - ts % 60'000].emplace_back(key, v);
      });
    }
    sqlite3_finalize(st);
    sqlite3_exec(h, "BEGIN; DELETE FROM rollups; DROP TABLE hours", nullptr, nullptr, nullptr);
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
  CHECK(kiwi_test::sqlite_value(db.path(), "PRAGMA user_version") == "4");
  const auto after = answers(store);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    INFO("series " << keys[i]);
    CHECK(after[i].timestamps == before[i].timestamps);
    REQUIRE(after[i].series.size() == 1);
    CHECK(same_values(after[i].series[0].values, before[i].series[0].values));
  }
  check_paths_agree(store, t0, t0 + 4 * 3'600'000, keys);
  // The hour it took over in is left unfolded (its rows hold every series); the next is folded.
  fill(store, t0 + 2 * 3'600'000 + 610'000, t0 + 3 * 3'600'000 + 300'000);
  store.flush(0, 0);
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT count(*) FROM hours WHERE ts % 3600000 = 0") ==
        "0");
  check_paths_agree(store, t0, t0 + 4 * 3'600'000, keys);
  fill(store, t0 + 3 * 3'600'000 + 300'000, t0 + 4 * 3'600'000 + 120'000);
  store.flush(0, 0);
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT count(*) FROM hours WHERE ts % 3600000 = 0") ==
        "1");
  check_paths_agree(store, t0, t0 + 5 * 3'600'000, keys);
}
