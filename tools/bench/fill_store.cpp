// Writes a data directory holding a day of history, for start-up on a full store
// (tools/bench/matrix.py, issue 17: "start-up to the first 200 <= 20 ms on a data directory
// holding 24 h of history"): HOURS (default 24) of 1 Hz ticks of SERIES (default 112, about what
// the default sensors emit on a small board) gauges, through the agent's own Store::append and
// Store::flush as the collector calls them (a commit every 300 ticks, the default
// commit_interval of 5 minutes; each syncs its ticks to the tick log), with the last tick now, so
// an agent started on it sees a full, current day. Built with the tests (tools/test.sh, or
// tools/build.sh -DKIWI_BUILD_TESTS=ON):
//   build/bin/kiwi-bench-fill DATA_DIR [--hours H] [--series N]
// DATA_DIR must not hold a kiwi.db yet (it is never overwritten).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "store/store.hpp"

using namespace kiwi::agent;

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: kiwi-bench-fill DATA_DIR [--hours H] [--series N]\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  long hours = 24, series = 112;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const long v = std::strtol(argv[i + 1], nullptr, 10);
    if (v <= 0 || (a != "--hours" && a != "--series")) {
      std::fprintf(stderr, "kiwi-bench-fill: bad argument '%s %s'\n", argv[i], argv[i + 1]);
      return 2;
    }
    (a == "--hours" ? hours : series) = v;
  }
  std::filesystem::create_directories(dir);
  if (std::filesystem::exists(dir / "kiwi.db")) {
    std::fprintf(stderr, "kiwi-bench-fill: %s already exists\n", (dir / "kiwi.db").c_str());
    return 2;
  }
  const auto started = std::chrono::steady_clock::now();
  try {
    Store store((dir / "kiwi.db").string());
    // Gauges and counters in base units, a few series per name as the default sensors emit them
    // (per CPU, per interface, per mount).
    std::vector<kiwi::MetricValue> metrics;
    for (long i = 0; i < series; ++i) {
      const bool counter = i % 3 == 0;
      metrics.push_back({"kiwi_fill_" + std::string(counter ? "bytes_total" : "ratio") + "_" +
                             std::to_string(i / 8),
                         {{"index", std::to_string(i % 8)}},
                         0,
                         counter ? "bytes" : "ratio",
                         counter ? kiwi::MetricKind::counter : kiwi::MetricKind::gauge});
    }
    std::vector<const kiwi::MetricValue*> ptrs;
    for (auto& m : metrics) ptrs.push_back(&m);
    const std::int64_t ticks = hours * 3600;
    const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count() /
                                1000 * 1000;
    const std::int64_t t0 = now_ms - (ticks - 1) * 1000;
    const std::int64_t retention_ms = hours * 3600 * 1000;
    for (std::int64_t t = 0; t < ticks; ++t) {
      for (std::size_t i = 0; i < metrics.size(); ++i) {
        if (metrics[i].kind == kiwi::MetricKind::counter)
          metrics[i].value += 1000.0 + static_cast<double>((t * 7 + i) % 500);
        else
          metrics[i].value = 0.5 + 0.4 * std::sin(t / 300.0 + static_cast<double>(i));
      }
      const std::int64_t ts = t0 + t * 1000;
      store.append(ts, ptrs);
      if (t % 300 == 299) store.flush(ts - retention_ms, 0);  // commit_interval = 5 min
    }
    store.close_current_minute();
    store.flush(now_ms - retention_ms, 0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiwi-bench-fill: %s\n", e.what());
    return 1;
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::uintmax_t bytes = 0;  // the history file and its tick log
  for (auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file()) bytes += e.file_size();
  std::printf("kiwi-bench-fill: %ld h x %ld series at 1 Hz, %.1f MB in %s, %.1f s\n", hours, series,
              static_cast<double>(bytes) / 1e6, dir.c_str(), secs);
  return 0;
}
