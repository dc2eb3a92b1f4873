// The tiers (schema.hpp): raw ticks, minute summaries (hour rows), hour summaries (day rows), each
// pruned at its own cutoff; queries read the coarsest tier the step allows and a coarser one where
// a finer one is gone, with the answers the samples give.
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <map>

#include "store_test_support.hpp"

using namespace kiwi::agent;
using namespace store_test;

namespace {

constexpr std::int64_t kDay = 86'400'000, kHour = 3'600'000;
constexpr std::int64_t t0 = 1'764'460'800'000;  // 2025-11-30T00:00:00Z, a whole day
constexpr std::int64_t kEvery = 10'000;         // one sample every 10 s
constexpr std::int64_t kSpan = 3 * kDay + 2 * kHour;

// The samples of series "a" (a wave) and "b" (its index), every 10 s from t0 for kSpan.
double a_at(std::int64_t i) {
  return std::round(1000 * std::sin(static_cast<double>(i) / 97.0)) / 100.0;
}

void fill(Store& store) {
  for (std::int64_t i = 0; i * kEvery < kSpan; ++i)
    append(store, t0 + i * kEvery,
           {metric("a", a_at(i), ""), metric("b", static_cast<double>(i), "")}, i % 6 == 5);
  store.flush(0, 0);
}

// What the samples give for "a" in buckets of `step` ms over [from, to): mean, min, max, last.
struct Expected {
  std::vector<double> ts, mean, min, max, last;
};
Expected expected(std::int64_t from, std::int64_t to, std::int64_t step) {
  Expected e;
  std::map<std::int64_t, std::vector<double>> buckets;
  std::int64_t first = INT64_MAX;
  for (std::int64_t i = 0; i * kEvery < kSpan; ++i) {
    const std::int64_t ts = t0 + i * kEvery;
    if (ts >= from && ts < to) buckets[ts - (ts % step)].push_back(a_at(i));
    if (ts >= from) first = std::min(first, ts);
  }
  for (auto& [b, v] : buckets) {
    double sum = 0, lo = v[0], hi = v[0];
    for (double x : v) sum += x, lo = std::min(lo, x), hi = std::max(hi, x);
    // Labelled with its start, the first with its first sample (the data is continuous).
    e.ts.push_back(static_cast<double>(e.ts.empty() ? std::max(b, first) : b) / 1000);
    e.mean.push_back(sum / static_cast<double>(v.size()));
    e.min.push_back(lo);
    e.max.push_back(hi);
    e.last.push_back(v.back());
  }
  return e;
}

kiwi::HistoryResult ask(const Store& store, std::int64_t from, std::int64_t to, std::int64_t step,
                        kiwi::Aggregate agg, std::vector<std::string> patterns = {},
                        bool band = false) {
  kiwi::HistoryQuery q;
  q.band = band;
  q.since = static_cast<double>(from) / 1000;
  q.until = static_cast<double>(to - 1) / 1000;
  q.step = static_cast<double>(step) / 1000;
  q.aggregate = agg;
  q.patterns = std::move(patterns);
  q.limit = 1'000'000;
  return store.query(q);
}

// The query over [from, to) at `step` gives the samples' answer, for every aggregate and the
// band, through the few-series path ("a") and the every-series path (no pattern) alike.
void check_answers(const Store& store, std::int64_t from, std::int64_t to, std::int64_t step) {
  const Expected e = expected(from, to, step);
  for (auto patterns : {std::vector<std::string>{"a"}, std::vector<std::string>{}}) {
    INFO("step " << step / 1000 << " s, " << (patterns.empty() ? "every series" : "one series"));
    const std::pair<kiwi::Aggregate, const std::vector<double>*> aggs[] = {
        {kiwi::Aggregate::mean, &e.mean},
        {kiwi::Aggregate::min, &e.min},
        {kiwi::Aggregate::max, &e.max},
        {kiwi::Aggregate::last, &e.last}};
    for (auto& [agg, want] : aggs) {
      auto r = ask(store, from, to, step, agg, patterns);
      CHECK(r.timestamps == e.ts);
      auto* s = find(r, "a");
      REQUIRE(s);
      REQUIRE(s->values.size() == want->size());
      for (std::size_t i = 0; i < want->size(); ++i)
        CHECK(s->values[i] == Approx((*want)[i]).margin(1e-9));
    }
    for (auto agg : {kiwi::Aggregate::mean, kiwi::Aggregate::last}) {  // any aggregate's band
      auto r = ask(store, from, to, step, agg, patterns, true);
      auto* s = find(r, "a");
      REQUIRE(s);
      CHECK(s->min == e.min);
      CHECK(s->max == e.max);
    }
  }
}

std::string count(const TempDb& db, const std::string& sql) {
  return kiwi_test::sqlite_value(db.path(), sql.c_str());
}

}  // namespace

TEST_CASE("store: tiers: hour summaries answer as the samples do, and take over when minutes go") {
  TempDb db;
  {
    Store store(db.path());
    fill(store);
    // Days 0 to 2 are folded into day rows (when a minute of the next day was written); day 3
    // is in progress.
    for (std::int64_t d : {t0, t0 + kDay, t0 + 2 * kDay})
      CHECK(count(db, "SELECT count(*) FROM days WHERE ts = " + std::to_string(d)) == "1");
    CHECK(count(db, "SELECT count(*) FROM days WHERE ts >= " + std::to_string(t0 + 3 * kDay)) ==
          "0");
    // Whole tiers: hour summaries for whole hours, minutes, raw ticks; spanning the folded days
    // and the day in progress.
    check_answers(store, t0, t0 + kSpan, kHour);
    check_answers(store, t0 + 5 * kHour, t0 + 2 * kDay + 7 * kHour, 3 * kHour);
    check_answers(store, t0 + kDay - 2 * kHour, t0 + kDay + 2 * kHour, 60'000);
    check_answers(store, t0 + kDay - 600'000, t0 + kDay + 600'000, 20'000);
    check_answers(store, t0, t0 + kSpan, kDay);

    // Raw ticks of the first two days go, and the minutes of the first one.
    Store::Cutoffs cut{t0 + 2 * kDay, t0 + kDay, INT64_MIN};
    for (int i = 0; i < 400; ++i) store.flush(cut, 1000);
    CHECK(oldest_tick(store) >= t0 + 2 * kDay - 60'000);
    CHECK(count(db, "SELECT count(*) FROM hours WHERE ts < " + std::to_string(t0 + kDay)) == "0");
    CHECK(count(db, "SELECT count(*) FROM hours WHERE ts >= " + std::to_string(t0 + kDay)) != "0");
    // The same answers where a tier is left for it; seamless across each edge.
    check_answers(store, t0, t0 + kSpan, kHour);
    check_answers(store, t0 + kDay + 3 * kHour, t0 + 2 * kDay + 2 * kHour, 60'000);
    check_answers(store, t0 + 2 * kDay - 3 * kHour, t0 + 2 * kDay + kHour, 60'000);
    // Finer steps where the finer tiers are gone: each hour of day 0 once, each minute of day 1.
    auto fine = ask(store, t0, t0 + kSpan, 60'000, kiwi::Aggregate::mean, {"a"});
    const Expected hours = expected(t0, t0 + kDay, kHour);
    const Expected minutes = expected(t0 + kDay, t0 + kSpan, 60'000);
    REQUIRE(fine.timestamps.size() == hours.ts.size() + minutes.ts.size());
    for (std::size_t i = 0; i < hours.ts.size(); ++i) {
      CHECK(fine.timestamps[i] == hours.ts[i]);
      CHECK(fine.series[0].values[i] == Approx(hours.mean[i]).margin(1e-9));
    }
    auto raw = ask(store, t0 + 2 * kDay - 120'000, t0 + 2 * kDay + 60'000, 10'000,
                   kiwi::Aggregate::mean, {"b"});
    // Two minutes from minute summaries (one point each), then a minute of samples.
    REQUIRE(raw.timestamps.size() == 2 + 6);
    CHECK(raw.series[0].values[0] == Approx((2 * 8640 - 12 + 2 * 8640 - 7) / 2.0));
    CHECK(raw.series[0].values[2] == 2 * 8640);

    // Day rows go whole days at a time at their cutoff.
    for (int i = 0; i < 10; ++i)
      store.flush(Store::Cutoffs{t0 + 2 * kDay, t0 + kDay, t0 + kDay + kHour}, 1000);
    CHECK(count(db, "SELECT count(*) FROM days WHERE ts < " + std::to_string(t0 + kDay)) == "0");
    CHECK(count(db, "SELECT count(*) FROM days WHERE ts >= " + std::to_string(t0 + kDay)) != "0");
    check_answers(store, t0 + kDay, t0 + kSpan, kHour);
  }
  // A restart reads the same.
  Store again(db.path());
  check_answers(again, t0 + kDay, t0 + kSpan, kHour);
}

TEST_CASE(
    "store: tiers: a file of version 4 (no day rows) gets its days folded by the next commit") {
  TempDb db;
  {
    Store store(db.path());
    fill(store);
  }
  {
    sqlite3* h = nullptr;
    REQUIRE(sqlite3_open(db.path().c_str(), &h) == SQLITE_OK);
    REQUIRE(sqlite3_exec(h, "DROP TABLE days; PRAGMA user_version=4", nullptr, nullptr, nullptr) ==
            SQLITE_OK);
    sqlite3_close(h);
  }
  Store store(db.path());
  CHECK(count(db, "PRAGMA user_version") == "6");
  check_answers(store, t0, t0 + kSpan, kHour);  // from minutes, before the fold
  append(store, t0 + kSpan, {metric("a", 0, ""), metric("b", 0, "")}, false);
  store.flush(0, 0);
  CHECK(count(db, "SELECT count(*) FROM days WHERE ts = " + std::to_string(t0)) == "1");
  CHECK(count(db, "SELECT count(*) FROM days WHERE ts = " + std::to_string(t0 + kDay)) == "1");
  check_answers(store, t0, t0 + 2 * kDay, kHour);  // from day rows, the same
}

TEST_CASE("store: tiers: retentions under an hour and a day keep what the next tier is made from") {
  // retention and minute_retention of a minute (cutoffs a minute behind each commit), with a
  // kill inside an hour: the minutes of that hour are made again from its ticks, and the day's
  // hour summaries from its minute summaries when it is over, so nothing of either is lost.
  TempDb db;
  const std::int64_t from = t0 + 22 * kHour, kill_at = t0 + 23 * kHour + 30 * 60'000,
                     to = t0 + kDay + 30 * 60'000;
  auto run = [&](std::int64_t a, std::int64_t b) {
    Store store(db.path());
    for (std::int64_t i = a / kEvery - t0 / kEvery; t0 + i * kEvery < b; ++i) {
      const std::int64_t ts = t0 + i * kEvery;
      append(store, ts, {metric("a", a_at(i), ""), metric("b", static_cast<double>(i), "")}, false);
      if (i % 6 == 5) store.flush(Store::Cutoffs{ts - 60'000, ts - 60'000, INT64_MIN}, 1000);
    }
    // The ticks of 23:00-23:29 outlived their retention until hour 23 was folded; then they went
    // (the tick log deletes a file later, once its hour is two behind; readers do not see what
    // is left of it before the cutoff).
    if (b == to) CHECK(oldest_tick(store) >= t0 + kDay);
  };  // no close_current_minute() nor a last flush: as a kill -9 after a commit
  run(from, kill_at);
  run(kill_at, to);
  // Minute summaries of day 0 stayed until its hour summaries were made, then went.
  CHECK(count(db, "SELECT count(*) FROM days WHERE ts = " + std::to_string(t0)) == "1");
  CHECK(count(db, "SELECT count(*) FROM hours WHERE ts < " + std::to_string(t0 + kDay)) == "0");
  Store store(db.path());
  check_answers(store, from, t0 + kDay, kHour);  // each hour whole, from its day row
}
