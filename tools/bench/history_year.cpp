// A year of history (issue 39): fills a store as an agent with the default tiers would have kept
// it, then times the dashboard's long views on it and says how big each tier is.
//   build/bin/kiwi-bench-year DIR [--days D] [--series N] [--runs R] [--like AGENT_DB]
// DIR/kiwi.db is filled first if it does not exist (through Store::append() and flush() as the
// collector calls them, so the rows are what an agent writes): D days (default 365) of N series
// (default 196, what the default agent stores on this VM) ending now; the last 24 h at 1 Hz,
// older days at one tick every 10 s (a tenth of the ticks: the minute and hour summaries are made
// from them by the store as usual, each of 6 samples instead of 60) but for the 4 hours about to
// reach 30 days (at 1 Hz: below), 60 ticks a commit (one a minute at 1 Hz), every tier pruned at
// its default retention as the fill goes (24 h raw, 30 days of minutes, a year of hours). The
// series are a default agent's mix: half constant (sizes, limits), a fifth counters, the rest
// gauges that wander with noise, at two decimals. With --like, the series are instead those of an
// agent's file (AGENT_DB: a copy of an agent's kiwi.db with its kiwi.db-ticks/), each tick's
// values its raw ticks replayed in a loop, one recorded tick per fill tick (a counter adds its
// recorded increase, ten times over at 10 s): a year that compresses as that agent's own would,
// where the synthetic gauges' noise makes minute summaries about 3 times larger a series-hour
// (383 B against 118-138 B for this VM's agent; tools/bench/disk.py's steady case prunes
// 30-day-old minutes as it adds new ones, so their size is its cost). The queries below ask for the
// synthetic names. The fill takes a few minutes; a second run reuses it. With --then M, no queries:
// the file's agent goes on for M minutes (then(), below) and the WAL frames of each commit are
// printed: run it on a copy. Otherwise each query, R times (default 9), the median and the slowest:
//   one series, 1 y at 43,200 s (730 points, the dashboard's 1 y range) and 30 d at 3,600 s;
//   the dashboard's set (12 names, 33 series), the same two windows and 7 d at 600 s, with their
//   min-max band as the dashboard asks (tools/bench/year_http.py asks them of an agent by HTTP);
//   every series, 30 d at 3,600 s.
// Prints one line per query, then the sizes of the file and of its tick log.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "store/store.hpp"

using namespace kiwi::agent;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::int64_t kDay = 86'400'000, kHour = 3'600'000;

// The series of the fill and each tick's values: the synthetic mix described at the top, or
// (--like) an agent's own raw ticks replayed in a loop.
class Source {
 public:
  static Source synthetic(long series) {
    Source s;
    for (long i = 0; i < series; ++i) {
      const long k = i % 10;
      const bool counter = k == 5 || k == 6;
      s.metrics_.push_back({"fill_" +
                                std::string(k < 5     ? "constant"
                                            : counter ? "counter"
                                                      : "gauge") +
                                "_" + std::to_string(i / 10),
                            {{"index", std::to_string(i % 10)}},
                            k < 5 ? static_cast<double>(i * 4096) : 0,
                            counter ? "bytes" : "ratio",
                            counter ? kiwi::MetricKind::counter : kiwi::MetricKind::gauge});
    }
    return s;
  }

  // Every series an agent's file holds raw ticks of, with those ticks (at most a day's: its raw
  // retention), as Store::query() reads them back.
  static Source like(const std::string& path) {
    Store agent(path);
    kiwi::HistoryQuery q;
    q.limit = 100'000;
    const auto result = agent.query(q);
    if (result.timestamps.size() < 60)
      throw std::runtime_error(path + " holds " + std::to_string(result.timestamps.size()) +
                               " ticks; --like wants at least 60 (a minute of an agent)");
    Source s;
    for (const auto& h : result.series) {
      s.metrics_.push_back({h.name, h.labels, 0, h.unit, h.kind});
      s.recorded_.push_back(h.values);
    }
    return s;
  }

  std::size_t size() const { return metrics_.size(); }

  // The values of the next tick, at ts, `every` ms after the one before.
  const std::vector<const kiwi::MetricValue*>& tick(std::int64_t ts, std::int64_t every) {
    const std::size_t n = n_++;
    ptrs_.clear();
    for (std::size_t i = 0; i < metrics_.size(); ++i) {
      auto& m = metrics_[i];
      if (!recorded_.empty()) {
        // A gauge takes the recorded value; a counter adds the recorded increase, times 10 for
        // a tick of 10 s, so that it never runs backwards where the recording starts again.
        const auto& r = recorded_[i];
        const std::size_t j = n % r.size();
        if (std::isnan(r[j])) continue;
        if (m.kind != kiwi::MetricKind::counter)
          m.value = r[j];
        else if (j > 0 && r[j - 1] <= r[j])
          m.value += (r[j] - r[j - 1]) * static_cast<double>(every) / 1000;
        else if (n == 0)
          m.value = r[j];
      } else {
        const long k = static_cast<long>(i % 10);
        if (k == 5 || k == 6)
          m.value +=
              std::floor((1000 + 4000 * (noise_(rng_) + 0.5)) * static_cast<double>(every) / 1000);
        else if (k >= 7)
          m.value =
              std::round(100 *
                         (50 +
                          20 * std::sin(static_cast<double>(ts) / 3.6e6 + static_cast<double>(i)) +
                          noise_(rng_))) /
              100;
      }
      ptrs_.push_back(&m);
    }
    return ptrs_;
  }

 private:
  std::vector<kiwi::MetricValue> metrics_;
  // --like: recorded_[i][j], series i's value at recorded tick j (NaN: it had none); else empty.
  std::vector<std::vector<double>> recorded_;
  std::vector<const kiwi::MetricValue*> ptrs_;
  std::size_t n_ = 0;  // ticks made
  std::mt19937_64 rng_{39};
  std::uniform_real_distribution<double> noise_{-0.5, 0.5};
};

Store::Cutoffs default_cutoffs(std::int64_t ts) {
  return {ts - kDay, ts - 30 * kDay, ts - 365 * kDay};
}

// The fill: D days ending at now_ms, as described at the top.
void fill(const std::string& path, long days, Source& source, std::int64_t now_ms) {
  Store store(path);
  const std::int64_t start = (now_ms - days * kDay) / 1000 * 1000;
  std::int64_t last_commit = start;
  for (std::int64_t ts = start; ts <= now_ms;) {
    // 1 Hz, as the agent samples, for the raw ticks' day and for the hours that reach the
    // minutes' 30 days within 3 hours of the fill's end: the ones tools/bench/disk.py's steady
    // case prunes, where a summary of 6 samples would be smaller than the 60 its agent adds.
    const std::int64_t age = now_ms - ts;
    const bool one_hz = age <= kDay || (age > 30 * kDay - 3 * kHour && age <= 30 * kDay + kHour);
    const std::int64_t every = one_hz ? 1000 : 10'000;
    store.append(ts, source.tick(ts, every));
    if (ts - last_commit >= 60 * every) {  // 60 ticks a commit, as at the default 60 s
      last_commit = ts;
      store.flush(default_cutoffs(ts), 100'000);
    }
    ts += every;
  }
  store.close_current_minute();
  store.flush(default_cutoffs(now_ms), 100'000);
}

// --then M: the file's agent goes on for M minutes at 1 Hz, committing every 5 minutes (the
// default commit_interval) and pruning as the collector does, from 10 minutes past the hour
// after the file's newest tick (its first commit folds what the fill left unfolded; a later
// one, an hour's fold alone). Prints the WAL frames each commit wrote, and leaves the WAL as
// the last commit left it (the process ends without closing the file, as after kill -9), for
// tools/bench/wal_pages.py to say which pages they were.
[[noreturn]] void then(const std::string& path, Source& source, long minutes) {
  Store store(path);
  const std::int64_t newest = store.ticks_after(0).second;
  if (newest == INT64_MIN) throw std::runtime_error(path + " holds no ticks to go on from");
  const std::int64_t start = (newest / kHour + 1) * kHour + 10 * 60'000;
  auto frames = [wal = path + "-wal"] {
    // A WAL is a 32-byte header (the page size big-endian at byte 8), then frames of a 24-byte
    // header and a page each.
    unsigned char h[32];
    std::FILE* f = std::fopen(wal.c_str(), "rb");
    if (!f) return 0L;
    const bool read = std::fread(h, 1, sizeof h, f) == sizeof h;
    std::fseek(f, 0, SEEK_END);
    const long size = std::ftell(f);
    std::fclose(f);
    const long page = read ? (long{h[8]} << 24 | long{h[9]} << 16 | long{h[10]} << 8 | h[11]) : 0;
    return page > 0 ? (size - 32) / (page + 24) : 0L;
  };
  long before = frames();
  std::int64_t last_commit = start;
  int ticks = 0;
  for (std::int64_t ts = start; ts < start + minutes * 60'000; ts += 1000) {
    store.append(ts, source.tick(ts, 1000));
    ++ticks;
    if (ts - last_commit >= 300'000) {
      last_commit = ts;
      store.flush(default_cutoffs(ts), 32 * ticks);  // as the collector (store_cadence.cpp)
      ticks = 0;
      const long now = frames();
      if (now != before) {
        const std::time_t t = static_cast<std::time_t>(ts / 1000);
        char when[32];
        std::strftime(when, sizeof when, "%F %T UTC", std::gmtime(&t));
        std::printf("commit at %s: %ld WAL frames\n", when, now - before);
      }
      before = now;
    }
  }
  std::fflush(stdout);
  std::_Exit(0);
}

struct Timing {
  double median_ms, max_ms;
  std::size_t points, series;
};

Timing time_query(const Store& store, const kiwi::HistoryQuery& q, int runs) {
  std::vector<double> ms;
  Timing t{};
  (void)store.query(q);  // not timed: opens the read connection, as an agent's first request has
  for (int r = 0; r < runs; ++r) {
    const auto started = Clock::now();
    const auto result = store.query(q);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - started).count());
    t.points = result.timestamps.size();
    t.series = result.series.size();
  }
  std::sort(ms.begin(), ms.end());
  t.median_ms = ms[ms.size() / 2];
  t.max_ms = ms.back();
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr,
                 "usage: kiwi-bench-year DIR [--days D] [--series N] [--runs R] [--only TEXT] "
                 "[--like AGENT_DB] [--then MINUTES]\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  long days = 365, series = 196, runs = 9, then_minutes = 0;
  std::string only;  // the cases whose name contains it
  std::string like_db;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--only" || a == "--like") {
      (a == "--only" ? only : like_db) = argv[i + 1];
      continue;
    }
    const long v = std::strtol(argv[i + 1], nullptr, 10);
    long* target = a == "--days"     ? &days
                   : a == "--series" ? &series
                   : a == "--runs"   ? &runs
                   : a == "--then"   ? &then_minutes
                                     : nullptr;
    if (v <= 0 || !target) {
      std::fprintf(stderr, "kiwi-bench-year: bad argument '%s %s'\n", argv[i], argv[i + 1]);
      return 2;
    }
    *target = v;
  }
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "kiwi.db").string();
  try {
    const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
    Source source = like_db.empty() ? Source::synthetic(series) : Source::like(like_db);
    if (!std::filesystem::exists(path)) {
      const auto started = Clock::now();
      fill(path, days, source, now_ms);
      std::printf("fill: %ld days x %zu series%s in %.0f s\n", days, source.size(),
                  like_db.empty() ? "" : (" like " + like_db).c_str(),
                  std::chrono::duration<double>(Clock::now() - started).count());
    }
    if (then_minutes > 0) then(path, source, then_minutes);
    Store store(path);
    // As an agent that starts on the file: its first tick (an empty one here) folds the hours
    // the fill left unfolded and summarises the hour in progress in memory, so the queries read
    // them as an agent's do, not from the raw ticks (which cost up to an hour of ticks to
    // decode, by where in its hour the fill ended).
    store.append(now_ms, {});
    store.flush(INT64_MIN, 0);
    const double now = static_cast<double>(now_ms) / 1000;
    struct Case {
      const char* name;
      double span_s, step_s;
      std::vector<std::string> patterns;
      bool band = false;  // as the dashboard asks from 24 h on (www/assets/app.js, RANGES)
    };
    const std::vector<std::string> one = {"fill_gauge_3{index=\"7\"}"};
    const std::vector<std::string> dashboard = {
        "fill_gauge_0",   "fill_gauge_1",   "fill_gauge_2",    "fill_counter_0",
        "fill_counter_1", "fill_counter_2", "fill_constant_0", "fill_gauge_4",
        "fill_gauge_5",   "fill_counter_4", "fill_counter_5",  "fill_gauge_6"};
    const std::vector<Case> cases = {
        {"one series, 1 y at 43200 s", 365 * 86400.0, 43200, one},
        {"one series, 30 d at 3600 s", 30 * 86400.0, 3600, one},
        {"dashboard (12 names), 1 y at 43200 s, band", 365 * 86400.0, 43200, dashboard, true},
        {"dashboard (12 names), 30 d at 3600 s, band", 30 * 86400.0, 3600, dashboard, true},
        {"dashboard (12 names), 7 d at 600 s, band", 7 * 86400.0, 600, dashboard, true},
        {"every series, 30 d at 3600 s", 30 * 86400.0, 3600, {}},
    };
    for (auto& c : cases) {
      if (std::string(c.name).find(only) == std::string::npos) continue;
      kiwi::HistoryQuery q;
      q.band = c.band;
      q.since = now - c.span_s;
      q.until = now;
      q.step = c.step_s;
      q.limit = 100'000;
      q.patterns = c.patterns;
      const Timing t = time_query(store, q, static_cast<int>(runs));
      std::printf("%-46s median %8.2f ms, slowest %8.2f ms (%zu points, %zu series)\n", c.name,
                  t.median_ms, t.max_ms, t.points, t.series);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiwi-bench-year: %s\n", e.what());
    return 1;
  }
  std::uintmax_t log_bytes = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(path + "-ticks", ec), end; !ec && it != end;
       it.increment(ec))
    log_bytes += it->file_size();
  std::printf("file: %.1f MB (%s), tick log: %.1f MB (%s-ticks/)\n",
              static_cast<double>(std::filesystem::file_size(path)) / 1e6, path.c_str(),
              static_cast<double>(log_bytes) / 1e6, path.c_str());
  return 0;
}
