// The dashboard's heaviest query, a day downsampled to about 1,000 points, on a store holding a day
// of 1 Hz samples: once through the per-minute rollups (step >= 60 s) and once through the raw
// samples (step < 60 s), side by side in one run so the ratio is what counts.
// Built with the tests (tools/test.sh, or tools/build.sh -DKIWI_BUILD_TESTS=ON):
//   build/bin/kiwi-bench-history                         80 series, rollups and raw samples
//   build/bin/kiwi-bench-history --series 80,393,1537,6115
// With --series, one store per size (393, 1,537 and 6,115 are the series of tools/bench/scale.py's
// big host at 1/16, 1/4 and full size), filled and queried in turn: a 24 h window at a step of
// 86.4 s (1,000 points) through the rollups, of one series and of every series; the raw-sample
// queries only with --raw (at 6,115 series they read half a billion values).
// Each store is filled through Store::append() and flush() as the collector does (a tick a second,
// a commit every 10 s, the default commit_interval), so its file has the layout an agent writes.
// Writes the database under /tmp/kiwi-history-bench (7 MB at 80 series, 226 MB at 6,115; the fill
// takes about 30 ms per series) and removes it after each size.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "store/store.hpp"

using namespace kiwi::agent;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median_ms(Store& store, const kiwi::HistoryQuery& q, std::size_t* points,
                 std::size_t* series) {
  std::vector<double> ms;
  for (int run = 0; run < 5; ++run) {
    auto start = Clock::now();
    auto r = store.query(q);
    ms.push_back(seconds_since(start) * 1000);
    *points = r.timestamps.size();
    *series = r.series.size();
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

struct SizeResult {
  int series;
  double file_mb, fill_s, one_ms, all_ms;
  std::size_t one_points, all_points;
};

constexpr std::int64_t kT0 = 1'764'460'800'000;  // a whole day boundary, unix ms
constexpr int kDaySeconds = 86400;
constexpr int kCommitTicks = 10;  // commit_interval 10 s at 1 Hz

// A day of `n` series at 1 Hz into `store`; returns the seconds it took.
double fill(Store& store, int n) {
  std::vector<kiwi::MetricValue> metrics;
  for (int i = 0; i < n; ++i)
    metrics.push_back({"m" + std::to_string(i),
                       {{"core", std::to_string(i)}},
                       0,
                       "ratio",
                       kiwi::MetricKind::gauge});
  std::vector<const kiwi::MetricValue*> ptrs;
  for (auto& m : metrics) ptrs.push_back(&m);
  auto start = Clock::now();
  for (int t = 0; t < kDaySeconds; ++t) {
    for (std::size_t i = 0; i < metrics.size(); ++i)
      metrics[i].value = (t % 100) / 100.0 + 0.001 * static_cast<double>(i);
    store.append(kT0 + t * 1000LL, ptrs);
    if (t % kCommitTicks == kCommitTicks - 1) store.flush(0, 0);
  }
  store.close_current_minute();
  store.flush(0, 0);
  return seconds_since(start);
}

kiwi::HistoryQuery day_query(double step, std::vector<std::string> patterns) {
  kiwi::HistoryQuery q;
  q.since = kT0 / 1000.0;
  q.until = kT0 / 1000.0 + kDaySeconds;
  q.limit = 10000;
  q.step = step;
  q.patterns = std::move(patterns);
  return q;
}

std::vector<int> parse_sizes(const char* text) {
  std::vector<int> out;
  for (const char* p = text; *p;) {
    char* end = nullptr;
    long v = std::strtol(p, &end, 10);
    if (end == p || v < 2 || v > 1'000'000) {
      std::fprintf(stderr,
                   "kiwi-bench-history: --series: expected a comma-separated list of "
                   "series counts from 2 to 1000000, got \"%s\"\n",
                   text);
      std::exit(2);
    }
    out.push_back(static_cast<int>(v));
    p = *end == ',' ? end + 1 : end;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes;
  bool raw = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--series") && i + 1 < argc) {
      sizes = parse_sizes(argv[++i]);
    } else if (!std::strcmp(argv[i], "--raw")) {
      raw = true;
    } else {
      std::fprintf(stderr, "usage: kiwi-bench-history [--series N[,N...]] [--raw]\n");
      return 2;
    }
  }
  const bool classic = sizes.empty();  // the 80-series table, rollups beside raw samples
  if (classic) sizes = {80}, raw = true;

  const std::filesystem::path dir = "/tmp/kiwi-history-bench";
  std::vector<SizeResult> results;
  for (int n : sizes) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    SizeResult res{n, 0, 0, 0, 0, 0, 0};
    {
      Store store((dir / "kiwi.db").string());
      res.fill_s = fill(store, n);
      std::error_code no_wal;  // the WAL may have been checkpointed away
      const auto wal = std::filesystem::file_size(dir / "kiwi.db-wal", no_wal);
      res.file_mb =
          static_cast<double>(std::filesystem::file_size(dir / "kiwi.db") + (no_wal ? 0 : wal)) /
          1e6;
      std::printf("store: 86400 samples x %d series, %.1f MB, filled in %.1f s\n", n, res.file_mb,
                  res.fill_s);
      const std::string one = "m1";
      std::size_t points = 0, series = 0;
      res.one_ms = median_ms(store, day_query(86.4, {one}), &res.one_points, &series);
      res.all_ms = median_ms(store, day_query(86.4, {}), &res.all_points, &series);
      if (raw) {
        std::printf(
            "| query (24 h window) | series | points | median of 5, ms |\n|---|---:|---:|---:|\n");
        for (bool all : {true, false}) {
          const double rollup_ms = all ? res.all_ms : res.one_ms;
          const double raw_ms =
              median_ms(store, day_query(59.9, all ? std::vector<std::string>{} : std::vector{one}),
                        &points, &series);
          std::printf("| step=86.4 (minute rollups) | %s | %zu | %.1f |\n",
                      all ? std::to_string(n).c_str() : "1", all ? res.all_points : res.one_points,
                      rollup_ms);
          std::printf("| step=59.9 (raw samples) | %s | %zu | %.1f |\n",
                      all ? std::to_string(n).c_str() : "1", points, raw_ms);
          std::printf("| rollups / raw | | | %.2f |\n", rollup_ms / raw_ms);
        }
      }
    }
    std::fflush(stdout);
    results.push_back(res);
    std::filesystem::remove_all(dir);
  }
  if (classic) return 0;
  std::printf(
      "\n| series | file (db + wal) | fill (append + flush) | one series, 24 h, step 86.4 s | all "
      "series, 24 h, step 86.4 s |\n|---:|---:|---:|---:|---:|\n");
  for (auto& r : results)
    std::printf("| %d | %.1f MB | %.1f s | %.2f ms (%zu points) | %.1f ms (%zu points) |\n",
                r.series, r.file_mb, r.fill_s, r.one_ms, r.one_points, r.all_ms, r.all_points);
}
