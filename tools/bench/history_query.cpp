// Times a 24 h, ~1,000-point downsampled history query on a store filled with a day of samples of
// 80 series, the dashboard's heaviest query. Build and run (from the repository root, after
// tools/build.sh):
//   g++ -std=c++20 -O2 -Iagent/src -Iagent/include tools/bench/history_query.cpp \
//       -Lbuild/agent -lkiwi_core -lsqlite3 -lz -o build/history_query && build/history_query
// It writes a 40 MB database under /tmp/kiwi-history-bench.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include "store.hpp"
using namespace kiwi::agent;
int main() {
  std::filesystem::remove_all("/tmp/kiwi-history-bench"); std::filesystem::create_directories("/tmp/kiwi-history-bench");
  Store s("/tmp/kiwi-history-bench/kiwi.db");
  std::vector<kiwi::MetricValue> ms;
  for (int i = 0; i < 80; ++i) ms.push_back({"m" + std::to_string(i), {{"core", std::to_string(i)}}, 0.5, "ratio", kiwi::MetricKind::gauge});
  std::vector<const kiwi::MetricValue*> p; for (auto& m : ms) p.push_back(&m);
  auto t0 = std::chrono::steady_clock::now();
  for (int t = 0; t < 86400; ++t) { for (auto& m : ms) m.value = (t % 100) / 100.0 + 0.001 * (&m - &ms[0]) + (m.name == "m0" ? 8e9 : 0); s.append(1'000'000'000LL + t * 1000LL, p); if (t % 300 == 0) s.flush(0, 0); }
  s.flush(0, 0);
  auto t1 = std::chrono::steady_clock::now();
  printf("fill %.1f s, file %.1f MB\n", std::chrono::duration<double>(t1 - t0).count(), std::filesystem::file_size("/tmp/kiwi-history-bench/kiwi.db") / 1e6);
  for (auto pat : {std::vector<std::string>{}, std::vector<std::string>{"m1"}}) {
    kiwi::HistoryQuery q; q.since = 1'000'000; q.until = 1'000'000 + 86400; q.step = 86.4; q.limit = 10000; q.patterns = pat;
    for (int k = 0; k < 3; ++k) {
      auto a = std::chrono::steady_clock::now();
      auto r = s.query(q);
      auto b = std::chrono::steady_clock::now();
      printf("24h step 86.4 patterns=%zu: %zu points %zu series in %.1f ms\n", pat.size(), r.timestamps.size(), r.series.size(), std::chrono::duration<double, std::milli>(b - a).count());
    }
  }
}
