// The dashboard's heaviest query, a day downsampled to about 1,000 points, on a store holding a day
// of 1 Hz samples of 80 series: once through the per-minute rollups (step >= 60 s) and once through
// the raw samples (step < 60 s), side by side in one run so the ratio is what counts.
// Built with the tests (tools/test.sh, or tools/build.sh -DKIWI_BUILD_TESTS=ON):
//   build/bin/kiwi-bench-history
// Writes a ~40 MB database under /tmp/kiwi-history-bench and removes it at the end.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "store.hpp"

using namespace kiwi::agent;
using Clock = std::chrono::steady_clock;

namespace {

double median_ms(Store& store, const kiwi::HistoryQuery& q, std::size_t* points) {
  std::vector<double> ms;
  for (int run = 0; run < 5; ++run) {
    auto start = Clock::now();
    auto r = store.query(q);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    *points = r.timestamps.size();
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main() {
  const std::filesystem::path dir = "/tmp/kiwi-history-bench";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    Store store((dir / "kiwi.db").string());
    std::vector<kiwi::MetricValue> metrics;
    for (int i = 0; i < 80; ++i)
      metrics.push_back({"m" + std::to_string(i),
                         {{"core", std::to_string(i)}},
                         0,
                         "ratio",
                         kiwi::MetricKind::gauge});
    std::vector<const kiwi::MetricValue*> ptrs;
    for (auto& m : metrics) ptrs.push_back(&m);
    const std::int64_t t0 = 1'764'460'800'000;  // a whole day boundary
    for (int t = 0; t < 86400; ++t) {
      for (std::size_t i = 0; i < metrics.size(); ++i)
        metrics[i].value = (t % 100) / 100.0 + 0.001 * i;
      store.append(t0 + t * 1000LL, ptrs);
      if (t % 5 == 4) store.flush(0, 0);  // the collector's default commit interval
    }
    store.close_current_minute();
    store.flush(0, 0);
    std::printf("store: 86400 samples x 80 series, %.1f MB\n",
                std::filesystem::file_size(dir / "kiwi.db") / 1e6);

    kiwi::HistoryQuery q;
    q.since = t0 / 1000.0;
    q.until = t0 / 1000.0 + 86400;
    q.limit = 10000;
    std::printf(
        "| query (24 h window) | series | points | median of 5, ms |\n|---|---:|---:|---:|\n");
    double rollup_ms = 0, raw_ms = 0;
    for (auto patterns : {std::vector<std::string>{}, std::vector<std::string>{"m1"}}) {
      q.patterns = patterns;
      for (double step : {86.4, 59.9}) {
        q.step = step;
        std::size_t points = 0;
        double ms = median_ms(store, q, &points);
        (step >= 60 ? rollup_ms : raw_ms) = ms;
        std::printf("| step=%g (%s) | %s | %zu | %.1f |\n", step,
                    step >= 60 ? "minute rollups" : "raw samples", patterns.empty() ? "80" : "1",
                    points, ms);
      }
      std::printf("| rollups / raw | | | %.2f |\n", rollup_ms / raw_ms);
    }
  }
  std::filesystem::remove_all(dir);
}
