// Helpers of the store's unit tests (tests/unit/store/test_*.cpp, one file per layer of
// agent/src/store): metrics to append, ticks appended as the collector does, and query results.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "store/store.hpp"
#include "test_support.hpp"

namespace store_test {
using namespace kiwi::agent;
namespace fs = std::filesystem;
using kiwi_test::TempDb;

inline kiwi::MetricValue metric(std::string name, double v, std::string unit = "ratio",
                                std::vector<std::pair<std::string, std::string>> labels = {}) {
  return {std::move(name), std::move(labels), v, std::move(unit), kiwi::MetricKind::gauge};
}

inline void append(Store& s, std::int64_t ts, const std::vector<kiwi::MetricValue>& ms,
                   bool flush = true) {
  std::vector<const kiwi::MetricValue*> ptrs;
  for (auto& m : ms) ptrs.push_back(&m);
  s.append(ts, ptrs);
  if (flush) s.flush(0, 0);
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The oldest raw tick a reader finds (INT64_MAX: none).
inline std::int64_t oldest_tick(const Store& store) {
  const auto raw = store.read_raw(INT64_MIN, 1);
  return raw.empty() ? INT64_MAX : raw.front().ts_ms;
}

// The hours of the tick log's files beside `db` (unix ms), oldest first.
inline std::vector<std::int64_t> log_hours(const std::string& db) {
  std::vector<std::int64_t> out;
  std::error_code ec;
  for (fs::directory_iterator it(db + "-ticks", ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".ticks") out.push_back(std::stoll(it->path().stem()) * 1000);
  std::sort(out.begin(), out.end());
  return out;
}

inline const kiwi::HistorySeries* find(const kiwi::HistoryResult& r, const std::string& key) {
  for (auto& s : r.series)
    if (s.key == key) return &s;
  return nullptr;
}

// The values of `key` in a step query over [since_s, until_s], with the bucket timestamps.
inline std::pair<std::vector<double>, std::vector<double>> stepped(const Store& store,
                                                                   double since_s, double until_s,
                                                                   double step, kiwi::Aggregate agg,
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

// Whether two history answers are the same, NaN (no data) equal to NaN.
inline bool same_values(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  return true;
}

// Every query of `keys` one at a time (the per-series path: hour rows, minute rows by key) gives
// what the query of every series (every row of every minute) gives for that series, band
// included; and every aggregate's band is what the aggregates min and max give.
inline void check_paths_agree(const Store& store, std::int64_t from_ms, std::int64_t to_ms,
                              const std::vector<std::string>& keys) {
  const double from = from_ms / 1000.0, to = to_ms / 1000.0;
  struct Window {
    double since, until, step;
  };
  const std::vector<Window> windows = {
      {from, to, 60},          {from, to, 86.4},           {from + 1830.5, to - 700, 300},
      {from, to, 3600},        {from + 7, to - 7, 60},     {from + 3599, from + 3 * 3600 + 61, 120},
      {from - 86400, to, 900}, {from + 5400, to + 100, 60}};
  for (auto& w : windows) {
    // Each with its band; [1] and [2] are the answers of min and max.
    std::vector<kiwi::HistoryResult> by_aggregate;
    for (auto agg : {kiwi::Aggregate::mean, kiwi::Aggregate::min, kiwi::Aggregate::max,
                     kiwi::Aggregate::last}) {
      kiwi::HistoryQuery q;
      q.since = w.since;
      q.until = w.until;
      q.step = w.step;
      q.aggregate = agg;
      q.limit = 1000;
      q.band = true;
      const auto& wide = by_aggregate.emplace_back(store.query(q));
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
        if (!a) continue;
        CHECK(same_values(a->values, b->values));
        CHECK(same_values(a->min, b->min));
        CHECK(same_values(a->max, b->max));
      }
    }
    // The band is the bucket's lowest and highest sample whatever the aggregate: what min and
    // max answer.
    for (auto& r : by_aggregate)
      for (auto& s : r.series) {
        INFO("series " << s.key << ", since " << w.since << ", step " << w.step);
        CHECK(same_values(s.min, find(by_aggregate[1], s.key)->values));
        CHECK(same_values(s.max, find(by_aggregate[2], s.key)->values));
      }
  }
}

// 150 series (three groups of rollup rows); values vary with the tick and the series.
inline std::vector<kiwi::MetricValue> host_metrics(std::int64_t ts, int n = 150) {
  std::vector<kiwi::MetricValue> out;
  for (int i = 0; i < n; ++i)
    out.push_back(metric("s" + std::to_string(i),
                         static_cast<double>((ts / 1000 + i * 7) % 97) / 8.0 + i, ""));
  return out;
}

}  // namespace store_test
