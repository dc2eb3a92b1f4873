// Outputs on the host side: the store's raw reader and cursors, the backoff, the batches, and the
// cursor an OutputRunner keeps as a receiver answers ok, retry or drop. The receiver here is a
// scripted kiwi::Output (the plugin's HTTP is tested against real receivers in
// tests/integration/test_remote_write.cpp).
#include <catch2/catch.hpp>
#include <deque>
#include <filesystem>

#include "base/log.hpp"
#include "fake_clock.hpp"
#include "output/output.hpp"
#include "store/store.hpp"
#include "test_support.hpp"

using namespace kiwi::agent;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

using kiwi_test::TempDb;

// Appends one tick of `n` series ("s0".."s<n-1>", plus a labelled "other") at `ts`.
void tick(Store& s, std::int64_t ts, int n = 3) {
  std::vector<kiwi::MetricValue> ms;
  for (int i = 0; i < n; ++i)
    ms.push_back({"s" + std::to_string(i), {}, ts / 1000.0 + i, "ratio", kiwi::MetricKind::gauge});
  ms.push_back({"other_total", {{"z", "1"}, {"a", "2"}}, 1, "count", kiwi::MetricKind::counter});
  std::vector<const kiwi::MetricValue*> p;
  for (auto& m : ms) p.push_back(&m);
  s.append(ts, p);
}

// A receiver with a script of answers (then ok), recording what it took.
class Scripted final : public kiwi::Output {
 public:
  std::deque<kiwi::WriteResult> answers;
  std::vector<kiwi::OutputBatch> taken;
  int calls = 0;
  kiwi::WriteResult write(const kiwi::OutputBatch& b) override {
    ++calls;
    kiwi::WriteResult r = kiwi::WriteResult::ok();
    if (!answers.empty()) {
      r = answers.front();
      answers.pop_front();
    }
    if (r.status == kiwi::WriteStatus::ok) taken.push_back(b);
    return r;
  }
};

struct Quiet final : kiwi::Logger {
  std::vector<std::string> lines;
  void log(kiwi::LogLevel, std::string_view m) override { lines.emplace_back(m); }
};

OutputSpec spec_of(Scripted*& out, std::size_t max_samples = 10'000,
                   std::vector<std::string> series = {}) {
  OutputSpec spec;
  spec.name = "rw";
  spec.plugin = "scripted";
  spec.max_samples = max_samples;
  spec.series = std::move(series);
  auto obj = std::make_unique<Scripted>();
  out = obj.get();
  spec.instance.object = std::move(obj);
  return spec;
}

}  // namespace

TEST_CASE("output: backoff doubles from 1 s and stops at 30 s") {
  CHECK(backoff_delay(1) == Millis(1000));
  CHECK(backoff_delay(2) == Millis(2000));
  CHECK(backoff_delay(3) == Millis(4000));
  CHECK(backoff_delay(5) == Millis(16000));
  CHECK(backoff_delay(6) == Millis(30000));
  CHECK(backoff_delay(1000) == Millis(30000));
}

TEST_CASE("store: read_raw gives whole ticks after a timestamp, committed and queued, bounded") {
  TempDb db;
  Store store(db.path());
  for (int i = 1; i <= 5; ++i) tick(store, i * 1000);
  store.flush(0, 0);                                   // 1..5 committed
  for (int i = 6; i <= 8; ++i) tick(store, i * 1000);  // 6..8 queued only
  bool more = true;
  auto all = store.read_raw(0, 1000, &more);
  REQUIRE(all.size() == 8);
  CHECK_FALSE(more);
  for (std::size_t i = 0; i < all.size(); ++i) {
    CHECK(all[i].ts_ms == static_cast<std::int64_t>(i + 1) * 1000);
    CHECK(all[i].values.size() == 4);
  }
  // After a timestamp, exclusive; bounded by values (4 a tick): 9 values hold two ticks.
  auto some = store.read_raw(3000, 9, &more);
  REQUIRE(some.size() == 2);
  CHECK(some[0].ts_ms == 4000);
  CHECK(some[1].ts_ms == 5000);
  CHECK(more);
  // Across the committed/queued edge.
  auto edge = store.read_raw(4000, 12, &more);
  REQUIRE(edge.size() == 3);
  CHECK(edge[2].ts_ms == 7000);
  // One tick at least, even when it alone is over the bound.
  CHECK(store.read_raw(0, 1).size() == 1);
  CHECK(store.read_raw(8000, 100).empty());
  auto [n, newest] = store.ticks_after(5000);
  CHECK(n == 3);
  CHECK(newest == 8000);
}

TEST_CASE("store: an output cursor survives a reopen once a flush committed it") {
  TempDb db;
  {
    Store store(db.path());
    CHECK_FALSE(store.cursor("rw"));
    store.set_cursor("rw", 42'000);
    CHECK(store.cursor("rw") == 42'000);
    store.flush(0, 0);
    store.set_cursor("rw", 43'000);  // not flushed: a crash would lose it
  }
  Store again(db.path());
  CHECK(again.cursor("rw") == 42'000);
  CHECK_FALSE(again.cursor("other"));
}

TEST_CASE("output: a batch groups points by series, oldest first, labels sorted, series filtered") {
  TempDb db;
  Store store(db.path());
  for (int i = 1; i <= 3; ++i) tick(store, i * 1000, 2);
  auto ticks = store.read_raw(0, 100);
  auto catalog = store.series();
  auto b = make_batch(ticks, *catalog, [](const SeriesInfo& s) { return s.name != "s1"; });
  CHECK(b.oldest_ms == 1000);
  CHECK(b.newest_ms == 3000);
  CHECK(b.sample_count == 6);
  REQUIRE(b.series.size() == 2);
  CHECK(b.series[0].name == "s0");
  REQUIRE(b.series[0].points.size() == 3);
  CHECK(b.series[0].points[0].timestamp_ms == 1000);
  CHECK(b.series[0].points[2].timestamp_ms == 3000);
  CHECK(b.series[0].points[2].value == 3.0);
  CHECK(b.series[1].name == "other_total");
  CHECK(b.series[1].kind == kiwi::MetricKind::counter);
  CHECK(b.series[1].labels ==
        std::vector<std::pair<std::string, std::string>>{{"a", "2"}, {"z", "1"}});
}

TEST_CASE("output: a new output starts at the newest stored tick, not the whole history") {
  TempDb db;
  Store store(db.path());
  for (int i = 1; i <= 5; ++i) tick(store, i * 1000);
  Quiet log;
  Scripted* rx = nullptr;
  OutputRunner runner(spec_of(rx), store, log);
  CHECK(runner.acked_ms() == 5000);
  CHECK(runner.step() == OutputRunner::Step::idle);
  tick(store, 6000);
  CHECK(runner.step() == OutputRunner::Step::sent);
  REQUIRE(rx->taken.size() == 1);
  CHECK(rx->taken[0].oldest_ms == 6000);
}

TEST_CASE("output: retry keeps the cursor, then the backlog goes oldest first in bounded batches") {
  TempDb db;
  Store store(db.path());
  store.set_cursor("rw", 0);
  Quiet log;
  Scripted* rx = nullptr;
  OutputRunner runner(spec_of(rx, 8), store, log);  // 8 values: two ticks a batch
  for (int i = 1; i <= 5; ++i) tick(store, i * 1000);
  rx->answers = {kiwi::WriteResult::retry("HTTP 503"), kiwi::WriteResult::retry("timeout")};
  CHECK(runner.step() == OutputRunner::Step::retry);
  CHECK(runner.step() == OutputRunner::Step::retry);
  CHECK(runner.acked_ms() == 0);
  auto st = runner.status();
  CHECK(st.failures_total == 2);
  CHECK(st.last_error == "timeout");
  CHECK(st.seconds_behind == 5.0);
  // The receiver is back: 1-2, 3-4 (more), then 5.
  CHECK(runner.step() == OutputRunner::Step::more);
  CHECK(runner.step() == OutputRunner::Step::more);
  CHECK(runner.step() == OutputRunner::Step::sent);
  REQUIRE(rx->taken.size() == 3);
  std::int64_t last = 0;
  std::size_t samples = 0;
  for (auto& b : rx->taken) {
    CHECK(b.oldest_ms > last);  // nothing twice, oldest first
    last = b.newest_ms;
    samples += b.sample_count;
  }
  CHECK(samples == 20);
  CHECK(runner.acked_ms() == 5000);
  CHECK(store.cursor("rw") == 5000);
  st = runner.status();
  CHECK(st.samples_sent_total == 20);
  CHECK(st.seconds_behind == 0);
  CHECK(st.samples_pending == 0);
}

TEST_CASE("output: a dropped batch is counted and logged once, and the cursor moves past it") {
  TempDb db;
  Store store(db.path());
  store.set_cursor("rw", 0);
  Quiet log;
  Scripted* rx = nullptr;
  OutputRunner runner(spec_of(rx, 4), store, log);  // one tick a batch
  for (int i = 1; i <= 3; ++i) tick(store, i * 1000);
  rx->answers = {kiwi::WriteResult::drop("HTTP 400: out of bounds"),
                 kiwi::WriteResult::drop("HTTP 400: out of bounds")};
  CHECK(runner.step() == OutputRunner::Step::more);
  CHECK(runner.step() == OutputRunner::Step::more);
  CHECK(runner.step() == OutputRunner::Step::sent);
  CHECK(runner.acked_ms() == 3000);
  auto st = runner.status();
  CHECK(st.batches_dropped_total == 2);
  CHECK(st.samples_dropped_total == 8);
  CHECK(st.last_error == "HTTP 400: out of bounds");
  REQUIRE(rx->taken.size() == 1);
  CHECK(rx->taken[0].oldest_ms == 3000);
  std::size_t drop_lines = 0;
  for (auto& l : log.lines) drop_lines += l.find("refused") != std::string::npos;
  CHECK(drop_lines == 1);  // rate-limited: at most one a minute
}

TEST_CASE(
    "output: series globs choose what is sent, and a tick with none of them moves the cursor") {
  TempDb db;
  Store store(db.path());
  store.set_cursor("rw", 0);
  Quiet log;
  Scripted* rx = nullptr;
  OutputRunner runner(spec_of(rx, 10'000, {"other_*"}), store, log);
  tick(store, 1000);
  CHECK(runner.step() == OutputRunner::Step::sent);
  REQUIRE(rx->taken.size() == 1);
  REQUIRE(rx->taken[0].series.size() == 1);
  CHECK(rx->taken[0].series[0].name == "other_total");
  Scripted* none = nullptr;
  store.set_cursor("rw2", 1000);
  auto spec = spec_of(none, 10'000, {"nothing_*"});
  spec.name = "rw2";
  OutputRunner empty(std::move(spec), store, log);
  tick(store, 2000);
  CHECK(empty.step() == OutputRunner::Step::sent);
  CHECK(none->calls == 0);
  CHECK(empty.acked_ms() == 2000);
}

TEST_CASE("output: refused batches are logged at most once a minute, with the count not logged") {
  TempDb db;
  Store store(db.path());
  store.set_cursor("rw", 0);
  Quiet log;
  Scripted* rx = nullptr;
  FakeClock clock;
  OutputRunner runner(spec_of(rx, 4), store, log, clock);  // one tick a batch
  for (int i = 1; i <= 4; ++i) tick(store, i * 1000);
  const auto refused = kiwi::WriteResult::drop("HTTP 400: out of bounds");
  rx->answers = {refused, refused, refused, refused};
  auto drop_lines = [&] {
    std::size_t n = 0;
    for (auto& l : log.lines) n += l.find("refused") != std::string::npos;
    return n;
  };
  CHECK(runner.step() == OutputRunner::Step::more);
  CHECK(drop_lines() == 1);
  CHECK(runner.status().last_error_at == 1'796'119'200.0);  // the runner's wall clock
  clock.advance(59'999ms);
  CHECK(runner.step() == OutputRunner::Step::more);
  CHECK(drop_lines() == 1);
  clock.advance(1ms);  // a minute after the line
  CHECK(runner.step() == OutputRunner::Step::more);
  REQUIRE(drop_lines() == 2);
  CHECK_THAT(log.lines.back(),
             Catch::Contains("(and 1 more batches since the last such line): HTTP 400"));
  CHECK(runner.step() == OutputRunner::Step::dropped);
  CHECK(drop_lines() == 2);
  CHECK(runner.status().last_error_at == 1'796'119'260.0);
}

TEST_CASE(
    "output: the runner's thread waits 1 s after a failure, 2 s after the next, then its "
    "interval") {
  TempDb db;
  Store store(db.path());
  store.set_cursor("rw", 0);
  Quiet log;
  Scripted* rx = nullptr;
  FakeClock clock;
  OutputRunner runner(spec_of(rx), store, log, clock);  // interval 10 s
  tick(store, 1000);
  rx->answers = {kiwi::WriteResult::retry("HTTP 503"), kiwi::WriteResult::retry("HTTP 503")};
  const auto t0 = clock.steady_now();
  runner.start();
  // The thread waits on the clock after each step: what it waits for is its schedule.
  CHECK(clock.await_waiters() == t0 + 1s);
  CHECK(runner.status().state == "retrying");
  CHECK(runner.status().failures_total == 1);
  clock.advance(1s);
  CHECK(clock.await_waiters() == t0 + 3s);
  CHECK(runner.status().failures_total == 2);
  clock.advance(2s);
  CHECK(clock.await_waiters() == t0 + 13s);
  CHECK(runner.status().state == "live");
  CHECK(runner.status().acked_at == 1.0);
  runner.stop();  // wakes it: no need for the clock to move
  CHECK(rx->calls == 3);
}
