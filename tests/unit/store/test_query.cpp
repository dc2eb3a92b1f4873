// Queries (store/query.hpp): windows, steps, aggregates, rollups and hour rows.
#include <catch2/catch.hpp>
#include <cmath>

#include "store_test_support.hpp"

using namespace kiwi::agent;
using namespace store_test;

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

TEST_CASE("store: a window whose globs match no series answers no points and reads nothing") {
  // (network_* on a board without it.) With a step, the tiers' reading had decoded every raw
  // tick of the range and answered their buckets' timestamps without a series.
  TempDb db;
  Store store(db.path());
  for (int i = 0; i < 120; ++i) {
    append(store, i * 1000, {metric("cpu_usage_ratio", 0.5)});
    if (i == 59) store.flush(INT64_MIN, 0);  // a committed minute, and one queued
  }
  for (double step : {0.0, 60.0}) {
    kiwi::HistoryQuery q;
    q.since = 0;
    q.step = step;
    q.patterns = {"network_*"};
    const auto r = store.query(q);
    CHECK(r.timestamps.empty());
    CHECK(r.series.empty());
  }
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

TEST_CASE("store: a band holds each bucket's lowest and highest sample, whatever the aggregate") {
  TempDb db;
  Store store(db.path());
  // a: 3 1 4 1 5 | 9 2 6 5 3; b only in the first bucket.
  const double a[] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  for (int i = 0; i < 10; ++i) {
    std::vector<kiwi::MetricValue> ms = {metric("a", a[i], "")};
    if (i < 5) ms.push_back(metric("b", 100 + i, ""));
    append(store, 1'000'000 + i * 1000, ms, i % 3 == 0);  // some still queued
  }
  kiwi::HistoryQuery q;
  q.since = 1000;
  q.until = 1009;
  q.step = 5;
  q.limit = 100;
  CHECK(store.query(q).series[0].min.empty());  // none unless asked for
  q.band = true;
  for (auto agg : {kiwi::Aggregate::mean, kiwi::Aggregate::last}) {
    q.aggregate = agg;
    auto r = store.query(q);
    REQUIRE(r.series.size() == 2);
    CHECK(r.series[0].values ==
          (agg == kiwi::Aggregate::mean ? std::vector<double>{2.8, 5} : std::vector<double>{5, 3}));
    CHECK(r.series[0].min == std::vector<double>{1, 2});
    CHECK(r.series[0].max == std::vector<double>{5, 9});
    CHECK(r.series[1].min[0] == 100);
    CHECK(r.series[1].max[0] == 104);
    CHECK(std::isnan(r.series[1].min[1]));  // null where the value is
    CHECK(std::isnan(r.series[1].max[1]));
  }
  q.limit = 1;  // the points `limit` keeps, with their band
  auto latest = store.query(q);
  REQUIRE(latest.series.size() == 1);
  CHECK(latest.series[0].min == std::vector<double>{2});
  CHECK(latest.series[0].max == std::vector<double>{9});
}

TEST_CASE("store: steps of a minute or more read per-minute rollups, with the same answers") {
  TempDb db;
  Store store(db.path());
  // Three minutes of 1 Hz samples; a's value is its second within the minute (0..59).
  const std::int64_t t0 = 1'764'475'800'000;  // a whole minute
  for (int i = 0; i < 180; ++i)
    append(store, t0 + i * 1000, {metric("a", i % 60, ""), metric("b", i, "")}, i % 7 == 0);
  store.flush(0, 0);  // minutes 1 and 2 are summarised (in memory until their hour is over);
                      // minute 3 is in progress (raw rows)
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT COUNT(*) FROM rollups") == "0");
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
  // A band from the rollups' own min and max (the third minute from its samples), whatever the
  // aggregate.
  q.band = true;
  q.aggregate = kiwi::Aggregate::last;
  auto band = store.query(q);
  CHECK(band.series[1].values == std::vector<double>{119, 179});
  CHECK(band.series[1].min == std::vector<double>{0, 120});
  CHECK(band.series[1].max == std::vector<double>{119, 179});
  CHECK(band.series[0].min == std::vector<double>{0, 0});
  CHECK(band.series[0].max == std::vector<double>{59, 59});
  q.step = 60;
  q.aggregate = kiwi::Aggregate::mean;
  band = store.query(q);
  CHECK(band.series[1].values == std::vector<double>{29.5, 89.5, 149.5});
  CHECK(band.series[1].min == std::vector<double>{0, 60, 120});
  CHECK(band.series[1].max == std::vector<double>{59, 119, 179});
  q.band = false;
  // A minute summary costs no write of its own: the hour's rows are written when it is over.
  store.close_current_minute();
  store.flush(0, 0);
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT COUNT(*) FROM rollups") == "0");
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT COUNT(*) FROM hours") == "0");
  append(store, t0 + 3'600'000, {metric("a", 0, ""), metric("b", 0, "")});
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT COUNT(*) FROM hours") == "3");  // map, a, b
  q.step = 60;
  check(kiwi::Aggregate::mean, {29.5, 29.5, 29.5}, {29.5, 89.5, 149.5});
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

TEST_CASE("store: a query of a few series (hour rows) answers as the query of every series does") {
  TempDb db;
  // A whole hour, 20:00 UTC: the hours pruned below are of a day that is over (the minute
  // summaries of the day in progress are kept, whatever the cutoff).
  const std::int64_t t0 = 1'764'446'400'000;
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
  // Two hours folded; the open hour's minutes were in memory only (made again from the ticks).
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT count(*) FROM hours WHERE ts % 3600000 = 0") ==
        "2");
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT count(*) FROM hours") == "302");
  CHECK(kiwi_test::sqlite_value(db.path(), "SELECT count(*) FROM rollups") == "0");
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
    // The hour it went back into is open again (read from memory, made again from its ticks),
    // the one it left folded.
    CHECK(kiwi_test::sqlite_value(db.path(), "SELECT count(*) FROM hours WHERE ts % 3600000 = 0") ==
          "5");
    check_paths_agree(store, t0, t0 + 6 * 3'600'000, keys);
    store.close_current_minute();
    fill(store, t0 + 5 * 3'600'000 + 130'000, t0 + 5 * 3'600'000 + 200'000);  // and forward
    CHECK(
        kiwi_test::sqlite_value(
            db.path(),
            ("SELECT count(*) FROM hours WHERE ts = " + std::to_string(t0 + 3'600'000)).c_str()) ==
        "1");
    check_paths_agree(store, t0, t0 + 6 * 3'600'000, keys);
    // Retention: an hour's rows go once the hour has ended by the cutoff (one hour a commit);
    // the hour the cutoff falls in keeps them.
    store.flush(t0 + 3'600'000 + 1'800'000, 1000);
    check_paths_agree(store, t0, t0 + 6 * 3'600'000, keys);
    store.flush(t0 + 3'600'000 + 1'800'000, 1000);
    CHECK(
        kiwi_test::sqlite_value(
            db.path(),
            ("SELECT count(*) FROM hours WHERE ts < " + std::to_string(t0 + 3'600'000)).c_str()) ==
        "0");
    CHECK(
        kiwi_test::sqlite_value(
            db.path(),
            ("SELECT count(*) FROM hours WHERE ts = " + std::to_string(t0 + 3'600'000)).c_str()) ==
        "1");
    check_paths_agree(store, t0, t0 + 6 * 3'600'000, keys);
  }
  Store store(db.path());
  check_paths_agree(store, t0, t0 + 6 * 3'600'000, keys);
}

TEST_CASE("store: bucket timestamps strictly increase for every step (a sweep of 60-180.5 s)") {
  // Ten minutes of 1 Hz samples that begin 23 s into a minute, the last minute still raw; a
  // step that is not a whole number of minutes makes minutes straddle buckets. Issue 36's
  // report: step 86.4 gave 05:11:23, 05:11:02.4, 05:12:28.8.
  TempDb db;
  Store store(db.path());
  const std::int64_t t0 = 1'764'475'800'000 + 23'000;
  for (int i = 0; i < 600; ++i)
    append(store, t0 + i * 1000, host_metrics(t0 + i * 1000, 40), false);
  store.flush(0, 0);
  for (const char* series : {"", "s1*"}) {  // every series (wide reads) and a few (narrow)
    for (double step = 60; step <= 180.5; step += 0.5) {
      kiwi::HistoryQuery q;
      q.since = t0 / 1000.0 - 86400;
      q.until = t0 / 1000.0 + 700;
      q.step = step;
      q.limit = 1000;
      if (*series) q.patterns = {series};
      const auto r = store.query(q);
      INFO("step " << step << ", series '" << series << "'");
      REQUIRE(!r.timestamps.empty());
      CHECK(r.timestamps.front() == t0 / 1000.0);
      for (std::size_t i = 1; i < r.timestamps.size(); ++i) {
        INFO("timestamps " << r.timestamps[i - 1] << " then " << r.timestamps[i]);
        REQUIRE(r.timestamps[i] > r.timestamps[i - 1]);
      }
      // Each label lies within its bucket: a multiple of the step, or a sample's time after one.
      const double last = r.timestamps.back();
      CHECK(last <= t0 / 1000.0 + 599);
    }
  }
}
