// The collector with in-process sensors (test classes, no shared object) on a fake clock: the
// samplers and their hand-off, deadlines, the schedule, reconfiguration and stop() with a sensor
// that never returns. Real threads call the sensors; a test sensor can block until the test lets
// it return, so the test decides when a call ends, and the clock moves only when the test moves
// it. Nothing here sleeps or reads the time: a wait is for an event, with a deadline.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "collect/collector.hpp"
#include "fake_clock.hpp"
#include "plugin/metric_check.hpp"

#include "test_support.hpp"

using namespace kiwi::agent;
using namespace std::chrono_literals;
using Steady = Clock::SteadyTime;

namespace {

// The fake clock's wall clock when it starts (2026-12-01T10:00:00Z), in unix ms.
constexpr std::int64_t kStartMs = 1'796'119'200'000;

struct RecordingLogger final : kiwi::Logger {
  void log(kiwi::LogLevel, std::string_view m) override {
    std::lock_guard lock(mutex);
    lines.emplace_back(m);
  }
  std::size_t count(const std::string& part) {
    std::lock_guard lock(mutex);
    return std::count_if(lines.begin(), lines.end(),
                         [&](auto& l) { return l.find(part) != std::string::npos; });
  }
  std::mutex mutex;
  std::vector<std::string> lines;
};

// What the test sees of a sensor; shared with it, so it outlives a leaked one.
struct Probe {
  std::mutex mutex;
  std::condition_variable cv;
  bool hold = false;  // sample() blocks while set, unless a pass is left
  int passes = 0;     // calls let through while holding
  std::atomic<int> calls{0}, returns{0}, concurrent{0}, overlaps{0};
  std::atomic<bool> destroyed{false};
  std::atomic<const void*> object{nullptr};
  std::thread::id sample_thread, destroy_thread;  // under mutex
  Steady deadline;                                // under mutex: the sink's, in the last call

  void hold_calls() {
    std::lock_guard lock(mutex);
    hold = true;
  }
  void release() {
    {
      std::lock_guard lock(mutex);
      hold = false;
    }
    cv.notify_all();
  }
  void let_one_through() {
    {
      std::lock_guard lock(mutex);
      ++passes;
    }
    cv.notify_all();
  }
  std::thread::id sampled_on() {
    std::lock_guard lock(mutex);
    return sample_thread;
  }
  std::thread::id destroyed_on() {
    std::lock_guard lock(mutex);
    return destroy_thread;
  }
  Steady sink_deadline() {
    std::lock_guard lock(mutex);
    return deadline;
  }
};

// Emits "<metric>" = how many samples it has taken (its own state, kept across ticks).
struct TestSensor final : kiwi::Sensor {
  TestSensor(std::shared_ptr<Probe> p, std::string m) : probe(std::move(p)), metric(std::move(m)) {}
  ~TestSensor() override {
    std::lock_guard lock(probe->mutex);
    probe->destroy_thread = std::this_thread::get_id();
    probe->destroyed = true;
  }
  kiwi::SampleResult sample(kiwi::MetricSink& sink) override {
    if (probe->concurrent++ != 0) ++probe->overlaps;
    ++probe->calls;
    probe->object = this;
    {
      std::unique_lock lock(probe->mutex);
      probe->sample_thread = std::this_thread::get_id();
      probe->deadline = sink.deadline();
      probe->cv.wait(lock, [&] { return !probe->hold || probe->passes > 0; });
      if (probe->hold) --probe->passes;
    }
    sink.emit({metric, kiwi::Unit::count, kiwi::MetricKind::gauge, "", ""},
              static_cast<double>(++samples));
    --probe->concurrent;
    ++probe->returns;
    return kiwi::SampleResult::ok();
  }
  std::shared_ptr<Probe> probe;
  std::string metric;
  std::int64_t samples = 0;
};

// Lets every probe's calls return when the test ends, even one that failed first (a collector
// stopping on a fake clock would otherwise wait for them for ever). Declared after the collector.
struct ReleaseAtEnd {
  std::vector<std::shared_ptr<Probe>> probes;
  ~ReleaseAtEnd() {
    for (auto& p : probes) p->release();
  }
};

SensorSpec spec(const std::string& name, std::shared_ptr<Probe> probe, std::int64_t every = 1,
                Millis timeout = Millis(0)) {
  SensorSpec s;
  s.name = name;
  s.plugin = "test";
  s.every_ticks = every;
  s.timeout = timeout;
  s.instance.object = std::make_unique<TestSensor>(std::move(probe), "t_" + name);
  return s;
}

// The running sensor of this name, kept as it is.
SensorSpec keep(const std::string& name, std::int64_t every = 1) {
  SensorSpec s;
  s.name = name;
  s.plugin = "test";
  s.every_ticks = every;
  return s;
}

template <class... Specs>
std::vector<SensorSpec> list(Specs&&... specs) {
  std::vector<SensorSpec> out;
  (out.push_back(std::move(specs)), ...);
  return out;
}

// For what the collector's threads do: polled, with a deadline of real time (the clock under
// test is fake).
template <class Pred>
bool eventually(Pred pred, Millis limit = Millis(10'000)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

struct Rig {
  explicit Rig(Clock::WallTime wall_start = FakeClock::kDefaultWallStart) : clock(wall_start) {}
  RecordingLogger log;
  kiwi_test::TempDir dir;
  Store store{(dir.path / "kiwi.db").string()};
  SnapshotHolder holder;
  FakeClock clock;

  std::uint64_t sequence() const { return holder.current()->sequence; }
  // Waits until `threads` threads wait on the clock (the collector and each sampler not held in
  // a call: nothing more happens until the clock moves) and returns the earliest time one of them
  // waits for.
  Steady settle(std::size_t threads) {
    auto t = clock.await_waiters(threads);
    REQUIRE(t);
    return *t;
  }
  // The collector thread, between ticks, waits for the next one: the clock goes there and the
  // tick is published (its sensors returning at once). `threads` as for settle().
  void next_tick(std::size_t threads) {
    const auto seq = sequence();
    clock.advance_to(settle(threads));
    REQUIRE(eventually([&] { return sequence() > seq; }));
  }
};

// collector.tick(n) on a thread of its own, for a test that moves the clock meanwhile. If a check
// fails first, the destructor moves the clock a day on (past any publish budget) and joins.
class TickThread {
 public:
  TickThread(Collector& collector, FakeClock& clock, std::int64_t n)
      : clock_(clock), thread_([&collector, n, this] {
          collector.tick(n);
          done_ = true;
        }) {}
  ~TickThread() {
    if (!thread_.joinable()) return;
    if (!done_) clock_.advance(24h);
    thread_.join();
  }
  bool done() const { return done_; }
  // Moves the clock to `t` (the tick's publish budget) and waits for the tick to end.
  void finish_at(Steady t) {
    clock_.advance_to(t);
    thread_.join();
  }

 private:
  FakeClock& clock_;
  std::atomic<bool> done_{false};
  std::thread thread_;  // last: it starts once the rest is there
};

CollectorSettings every(Millis interval) {
  CollectorSettings s;
  s.interval = interval;
  return s;
}

const kiwi::SensorReport& report(const kiwi::Snapshot& snap, const std::string& name) {
  for (auto& r : snap.sensors)
    if (r.name == name) return r;
  FAIL("no sensor " << name << " in the snapshot");
  throw;
}

double value_of(const kiwi::SensorReport& r) {
  REQUIRE(r.metrics.size() == 1);
  return r.metrics[0].value;
}

std::vector<std::string> names(const kiwi::Snapshot& snap) {
  std::vector<std::string> out;
  for (auto& r : snap.sensors) out.push_back(r.name);
  return out;
}

// The history's sample stamps, in unix ms.
std::vector<std::int64_t> stamps(Store& store) {
  std::vector<std::int64_t> out;
  for (double t : store.query({}).timestamps) out.push_back(std::llround(t * 1000));
  return out;
}

}  // namespace

TEST_CASE("collector: a hung sensor times out, the tick publishes on time and it resumes after") {
  Rig rig;
  auto fast = std::make_shared<Probe>();
  auto hung = std::make_shared<Probe>();
  hung->hold = true;
  {
    // hung first: its call starts with the tick (a call's timeout counts from its start), and
    // fast, queued behind it, is handed to another sampler.
    Collector collector(every(400ms), list(spec("hung", hung), spec("fast", fast)), rig.store,
                        rig.holder, rig.log, rig.clock);
    ReleaseAtEnd release{{hung}};
    const auto t0 = rig.clock.steady_now();
    {
      // Tick 0: hung is within its timeout (400 ms) when the budget (200 ms) is used up; the tick
      // publishes then, and not before.
      TickThread tick(collector, rig.clock, 0);
      REQUIRE(eventually([&] { return hung->calls == 1; }));
      CHECK(rig.settle(1) == t0 + 20ms);
      rig.clock.advance(20ms);  // the hand-off
      rig.settle(2);
      rig.clock.advance_to(t0 + 199ms);
      CHECK(rig.settle(2) == t0 + 200ms);
      CHECK_FALSE(tick.done());
      tick.finish_at(t0 + 200ms);
    }
    auto snap = rig.holder.current();
    CHECK(names(*snap) == std::vector<std::string>{"hung", "fast"});
    CHECK(report(*snap, "fast").state == kiwi::SensorState::ok);
    CHECK(value_of(report(*snap, "fast")) == 1);
    CHECK(report(*snap, "hung").state == kiwi::SensorState::no_data);
    CHECK(report(*snap, "hung").message == "first sample in progress");
    // Tick 1, at 400 ms: its deadline, 400 ms after its call began, has come: error, once. The
    // tick does not wait for the clock (fast returns at once).
    rig.clock.advance_to(t0 + 400ms);
    collector.tick(1);
    snap = rig.holder.current();
    CHECK(report(*snap, "hung").state == kiwi::SensorState::error);
    CHECK_THAT(report(*snap, "hung").message, Catch::StartsWith("timed out after 400ms"));
    CHECK(report(*snap, "hung").errors_total == 1);
    CHECK(report(*snap, "hung").metrics.empty());
    CHECK(value_of(report(*snap, "fast")) == 2);
    // Three ticks more: not waited for, not called again, still one error; fast is read every
    // tick.
    for (int i = 2; i <= 4; ++i) {
      rig.clock.advance_to(t0 + i * 400ms);
      collector.tick(i);
      snap = rig.holder.current();
      CHECK(value_of(report(*snap, "fast")) == i + 1);
      CHECK(report(*snap, "fast").timestamp == snap->timestamp);
      CHECK(report(*snap, "hung").state == kiwi::SensorState::error);
      CHECK(report(*snap, "hung").errors_total == 1);
    }
    CHECK(hung->calls == 1);
    CHECK(rig.log.count("sensor hung: timed out after 400ms; not called again until its call "
                        "returns") == 1);
    // Released at 1.6 s: its late reading is dropped, and it is sampled again at its next tick.
    hung->release();
    REQUIRE(eventually([&] { return hung->returns == 1; }));
    rig.clock.advance_to(t0 + 2000ms);
    collector.tick(5);
    snap = rig.holder.current();
    CHECK(rig.log.count("sensor hung: returned after 1.6s; sampling again") == 1);
    CHECK(hung->calls == 2);
    CHECK(report(*snap, "hung").state == kiwi::SensorState::ok);
    CHECK(value_of(report(*snap, "hung")) == 2);  // its second call; the first was discarded
    CHECK(report(*snap, "hung").errors_total == 1);
    CHECK(hung->overlaps == 0);
    // Only fast's readings were stored while hung was stuck.
    auto h = rig.store.query({});
    REQUIRE(h.timestamps.size() == 6);
  }
  CHECK(hung->destroyed);
  CHECK(fast->destroyed);
}

TEST_CASE("collector: the sink's deadline is the call's start plus the sensor's timeout") {
  // An exec sensor ends its child by then: it must be the instant the collector times it out at.
  Rig rig;
  auto own = std::make_shared<Probe>();
  auto by_interval = std::make_shared<Probe>();
  auto every_2 = std::make_shared<Probe>();
  Collector collector(every(400ms),
                      list(spec("own", own, 1, Millis(250)), spec("by_interval", by_interval),
                           spec("every_2", every_2, 2)),
                      rig.store, rig.holder, rig.log, rig.clock);
  const auto t0 = rig.clock.steady_now();
  collector.tick(0);  // every call returns at once: the clock stays at t0
  CHECK(own->sink_deadline() == t0 + 250ms);
  CHECK(by_interval->sink_deadline() == t0 + 400ms);
  CHECK(every_2->sink_deadline() == t0 + 800ms);  // its default timeout is its own interval
  // A sink made outside the collector has none.
  std::vector<kiwi::MetricValue> out;
  CHECK(CheckedSink(out).deadline() == Steady::max());
}

TEST_CASE(
    "collector: a sensor queued behind a slow one has its whole timeout, from its call's "
    "start") {
  Rig rig;
  auto slow = std::make_shared<Probe>(), late = std::make_shared<Probe>();
  slow->hold = late->hold = true;
  Collector collector(every(1s), list(spec("slow", slow, 1, 100ms), spec("late", late, 1, 100ms)),
                      rig.store, rig.holder, rig.log, rig.clock);
  ReleaseAtEnd release{{slow, late}};
  const auto t0 = rig.clock.steady_now();
  TickThread tick(collector, rig.clock, 0);
  REQUIRE(eventually([&] { return slow->calls == 1; }));
  CHECK(rig.settle(1) == t0 + 20ms);
  CHECK(late->calls == 0);
  rig.clock.advance(20ms);
  REQUIRE(eventually([&] { return late->calls == 1; }));
  CHECK(late->sink_deadline() == t0 + 120ms);
  // At 100 ms slow's deadline has passed; the tick goes on waiting for late's, not for its budget
  // (500 ms).
  rig.clock.advance_to(t0 + 100ms);
  CHECK(rig.settle(1) == t0 + 120ms);
  CHECK_FALSE(tick.done());
  tick.finish_at(t0 + 120ms);
  auto snap = rig.holder.current();
  for (const char* name : {"slow", "late"}) {
    INFO(name);
    CHECK(report(*snap, name).state == kiwi::SensorState::error);
    CHECK_THAT(report(*snap, name).message, Catch::StartsWith("timed out after 100ms"));
  }
}

TEST_CASE("collector: a sensor three intervals slow times out at its default timeout, then again") {
  Rig rig;
  auto fast = std::make_shared<Probe>();
  auto slow = std::make_shared<Probe>();
  slow->hold = true;
  Collector collector(every(200ms), list(spec("fast", fast), spec("slow", slow)), rig.store,
                      rig.holder, rig.log, rig.clock);
  ReleaseAtEnd release{{slow}};
  const auto t0 = rig.clock.steady_now();
  {
    TickThread tick(collector, rig.clock, 0);
    REQUIRE(eventually([&] { return slow->calls == 1; }));
    rig.settle(1);
    tick.finish_at(t0 + 100ms);  // the publish budget
  }
  // Its default timeout is its interval: timed out at the next tick.
  rig.clock.advance_to(t0 + 200ms);
  collector.tick(1);
  CHECK(report(*rig.holder.current(), "slow").state == kiwi::SensorState::error);
  rig.clock.advance_to(t0 + 400ms);
  collector.tick(2);
  // It returns at 600 ms, three intervals after its call began; it is called again at the next
  // tick, and is as slow.
  rig.clock.advance_to(t0 + 600ms);
  slow->let_one_through();
  REQUIRE(eventually([&] { return slow->returns == 1; }));
  {
    TickThread tick(collector, rig.clock, 3);
    REQUIRE(eventually([&] { return slow->calls == 2; }));
    rig.settle(2);
    tick.finish_at(t0 + 700ms);
  }
  rig.clock.advance_to(t0 + 800ms);
  collector.tick(4);
  CHECK(rig.log.count("sensor slow: timed out after 200ms; not called again until its call "
                      "returns") == 2);
  CHECK(rig.log.count("sensor slow: returned after 0.6s; sampling again") == 1);
  CHECK(slow->overlaps == 0);
  CHECK(slow->calls == 2);
  auto snap = rig.holder.current();
  CHECK(report(*snap, "slow").errors_total == 2);
  CHECK(report(*snap, "fast").state == kiwi::SensorState::ok);
  CHECK(report(*snap, "fast").errors_total == 0);
  CHECK(value_of(report(*snap, "fast")) == 5);
  slow->release();
  collector.stop();  // its call returns: nothing to wait for on the clock
  CHECK(collector.abandoned() == 0);
}

TEST_CASE("collector: a reading taking longer than the publish budget but within its timeout") {
  Rig rig;
  auto fast = std::make_shared<Probe>();
  auto patient = std::make_shared<Probe>();
  patient->hold = true;
  Collector collector(every(400ms), list(spec("fast", fast), spec("patient", patient, 1, 5s)),
                      rig.store, rig.holder, rig.log, rig.clock);
  ReleaseAtEnd release{{patient}};
  const auto t0 = rig.clock.steady_now();
  {
    TickThread tick(collector, rig.clock, 10);
    REQUIRE(eventually([&] { return patient->calls == 1; }));
    rig.settle(1);
    tick.finish_at(t0 + 200ms);
  }
  auto first = rig.holder.current();
  CHECK(report(*first, "patient").state == kiwi::SensorState::no_data);
  CHECK(report(*first, "patient").message == "first sample in progress");
  {
    // Still within 5 s: waited for until the budget, and the previous report is carried.
    rig.clock.advance_to(t0 + 400ms);
    TickThread tick(collector, rig.clock, 11);
    REQUIRE(eventually([&] { return fast->returns == 2; }));
    rig.settle(2);  // fast went to another sampler
    tick.finish_at(t0 + 600ms);
  }
  CHECK(report(*rig.holder.current(), "patient").message == "first sample in progress");
  patient->release();
  REQUIRE(eventually([&] { return patient->returns == 1; }));
  rig.clock.advance_to(t0 + 800ms);
  collector.tick(12);
  auto snap = rig.holder.current();
  const auto& r = report(*snap, "patient");
  CHECK(r.state == kiwi::SensorState::ok);
  CHECK(value_of(r) == 1);
  CHECK(r.timestamp == snap->timestamp);  // stamped with the tick it came back in
  CHECK(r.duration_seconds == 0.6);       // called at 0 ms, returned at 600 ms
  CHECK(r.errors_total == 0);
  CHECK(rig.log.count("timed out") == 0);
  // Its reading went to the store with the tick that published it.
  kiwi::HistoryQuery q;
  q.patterns = {"t_patient"};
  auto h = rig.store.query(q);
  REQUIRE(h.series.size() == 1);
  REQUIRE(h.timestamps.size() == 3);
  CHECK(std::isnan(h.series[0].values[0]));
  CHECK(std::isnan(h.series[0].values[1]));
  CHECK(h.series[0].values[2] == 1);
  CHECK(h.timestamps[2] == Approx(4.8));
  // Not called again in the tick that published its late reading, but in the next one.
  CHECK(patient->calls == 1);
  collector.tick(13);
  CHECK(patient->calls == 2);
  CHECK(value_of(report(*rig.holder.current(), "patient")) == 2);
  CHECK(patient->overlaps == 0);
}

TEST_CASE("collector: stop() abandons a sensor that never returns, within its 2 s bound") {
  Rig rig;
  auto fast = std::make_shared<Probe>();
  auto hung = std::make_shared<Probe>();
  hung->hold = true;
  std::thread::id hung_thread;
  {
    Collector collector(every(200ms), list(spec("fast", fast), spec("hung", hung)), rig.store,
                        rig.holder, rig.log, rig.clock);
    const auto t0 = rig.clock.steady_now();
    {
      TickThread tick(collector, rig.clock, 0);
      REQUIRE(eventually([&] { return hung->calls == 1; }));
      rig.settle(1);
      tick.finish_at(t0 + 100ms);
    }
    rig.clock.advance_to(t0 + 200ms);
    collector.tick(1);  // hung times out; fast goes to a second sampler
    // stop() on another thread: fast is destroyed at once, hung is given 2 s of the collector's
    // clock in all, and not a moment less.
    const auto stop_at = rig.clock.steady_now();
    std::atomic<bool> stopped{false};
    std::thread stopper([&] {
      collector.stop();
      stopped = true;
    });
    REQUIRE(eventually([&] { return fast->destroyed.load(); }));
    Steady next = rig.settle(1);
    for (int i = 0; i < 100 && next < stop_at + 2s; ++i) {  // the pool's hand-off checks
      rig.clock.advance_to(next);
      next = rig.settle(1);
    }
    CHECK(next == stop_at + 2s);
    rig.clock.advance_to(stop_at + 1999ms);
    CHECK(rig.settle(1) == stop_at + 2s);
    CHECK_FALSE(stopped);
    rig.clock.advance_to(stop_at + 2s);
    stopper.join();
    CHECK(collector.abandoned() == 1);
    CHECK(rig.log.count("sensor hung abandoned: its sample() has not returned after 2s; its "
                        "library stays loaded") == 1);
    CHECK(fast->destroyed);
    CHECK(fast->destroyed_on() == fast->sampled_on());  // on its own sampler
    CHECK_FALSE(hung->destroyed);
    hung_thread = hung->sampled_on();
  }  // the collector is gone; the abandoned thread is still in its call
  CHECK_FALSE(hung->destroyed);
  hung->release();  // so the process exits cleanly; its instance stays leaked
  REQUIRE(eventually([&] { return hung->returns == 1; }));
  CHECK_FALSE(hung->destroyed);
  CHECK(hung_thread != std::this_thread::get_id());
}

TEST_CASE("collector: reconfigure keeps, replaces, retires and adds sensors, in the new order") {
  Rig rig;
  auto kept = std::make_shared<Probe>();
  auto changed = std::make_shared<Probe>();
  auto removed = std::make_shared<Probe>();
  auto added = std::make_shared<Probe>();
  auto changed2 = std::make_shared<Probe>();
  Collector collector(every(1000ms),
                      list(spec("kept", kept), spec("changed", changed), spec("removed", removed)),
                      rig.store, rig.holder, rig.log, rig.clock);
  collector.tick(0);
  collector.tick(1);
  const void* kept_object = kept->object;
  REQUIRE(kept_object);
  collector.reconfigure(every(1000ms),
                        list(spec("added", added), keep("kept"), spec("changed", changed2)));
  // Retired idle sensors are gone, destroyed on their own threads.
  CHECK(removed->destroyed);
  CHECK(removed->destroyed_on() == removed->sampled_on());
  CHECK(removed->destroyed_on() != std::this_thread::get_id());
  CHECK(changed->destroyed);
  CHECK(changed->destroyed_on() == changed->sampled_on());
  CHECK_FALSE(kept->destroyed);
  collector.tick(2);
  auto snap = rig.holder.current();
  CHECK(names(*snap) == std::vector<std::string>{"added", "kept", "changed"});
  CHECK(kept->object == kept_object);
  CHECK(value_of(report(*snap, "kept")) == 3);  // its own counter goes on
  CHECK(value_of(report(*snap, "changed")) == 1);
  CHECK(value_of(report(*snap, "added")) == 1);
  CHECK(removed->calls == 2);

  // every_ticks changes on a kept sensor; a snapshot without its reading carries its own report
  // although its position changed.
  collector.reconfigure(every(1000ms), list(keep("changed"), keep("kept", 2), keep("added")));
  collector.tick(3);
  snap = rig.holder.current();
  CHECK(names(*snap) == std::vector<std::string>{"changed", "kept", "added"});
  CHECK(value_of(report(*snap, "kept")) == 3);  // not due on tick 3: its reading of tick 2
  CHECK(report(*snap, "kept").timestamp == 2);
  CHECK(value_of(report(*snap, "changed")) == 2);
  collector.tick(4);
  CHECK(value_of(report(*rig.holder.current(), "kept")) == 4);
  CHECK(kept->overlaps == 0);
}

TEST_CASE("collector: reconfigure while a sensor is hung returns at once and retires it later") {
  Rig rig;
  auto fast = std::make_shared<Probe>();
  auto hung = std::make_shared<Probe>();
  hung->hold = true;
  Collector collector(every(200ms), list(spec("fast", fast), spec("hung", hung)), rig.store,
                      rig.holder, rig.log, rig.clock);
  ReleaseAtEnd release{{hung}};
  collector.start();
  // The first tick, at once: fast is read, hung stays in its call; published at the budget.
  REQUIRE(eventually([&] { return hung->calls == 1; }));
  rig.clock.advance_to(rig.settle(1));  // the hand-off check: nothing is queued
  rig.clock.advance_to(rig.settle(1));  // the publish budget
  REQUIRE(eventually([&] { return rig.sequence() == 1; }));
  rig.next_tick(1);  // hung times out; fast goes to a new sampler
  // Applied between ticks: it returns with the clock where it is and hung still in its call.
  std::atomic<bool> applied{false};
  std::thread reconfigure([&] {
    collector.reconfigure(every(200ms), list(keep("fast")));
    applied = true;
  });
  const bool returned = eventually([&] { return applied.load(); });
  if (!returned) hung->release();
  reconfigure.join();
  REQUIRE(returned);
  const auto seq = rig.sequence();
  rig.next_tick(2);
  rig.next_tick(2);
  CHECK(rig.sequence() == seq + 2);
  CHECK(names(*rig.holder.current()) == std::vector<std::string>{"fast"});
  CHECK_FALSE(hung->destroyed);  // still in its call
  hung->release();
  // It returns, then destroys its instance on its own thread.
  REQUIRE(eventually([&] { return hung->destroyed.load(); }));
  CHECK(hung->destroyed_on() == hung->sampled_on());
  CHECK(hung->calls == 1);
  collector.stop();
  CHECK(collector.abandoned() == 0);
}

TEST_CASE(
    "collector: the first tick is stamped with the nearest boundary, the next is due on the "
    "one after") {
  // Started 700 ms into a second: the first tick at once, stamped with the coming boundary; the
  // next when the wall clock reaches the boundary after it, 1.3 s later.
  Rig rig(FakeClock::kDefaultWallStart + 700ms);
  auto probe = std::make_shared<Probe>();
  Collector collector(every(1s), list(spec("s", probe)), rig.store, rig.holder, rig.log, rig.clock);
  const auto t0 = rig.clock.steady_now();
  collector.start();
  REQUIRE(eventually([&] { return rig.sequence() == 1; }));
  CHECK(rig.holder.current()->timestamp == (kStartMs + 1000) / 1000.0);
  CHECK(rig.settle(2) == t0 + 1300ms);
  rig.next_tick(2);
  CHECK(rig.holder.current()->timestamp == (kStartMs + 2000) / 1000.0);
  CHECK(rig.settle(2) == t0 + 2300ms);
  collector.stop();
  CHECK(stamps(rig.store) == std::vector<std::int64_t>{kStartMs + 1000, kStartMs + 2000});
}

TEST_CASE("collector: a new interval re-aligns the ticks, with no gap longer than it") {
  Rig rig;
  auto probe = std::make_shared<Probe>();
  Collector collector(every(200ms), list(spec("s", probe)), rig.store, rig.holder, rig.log,
                      rig.clock);
  collector.start();
  REQUIRE(eventually([&] { return rig.sequence() == 1; }));
  for (int i = 0; i < 3; ++i) rig.next_tick(2);
  collector.reconfigure(every(500ms), list(keep("s")));
  const double switch1 = rig.holder.current()->timestamp;  // the last sample before it
  for (int i = 0; i < 3; ++i) rig.next_tick(2);
  CHECK(rig.holder.current()->interval_seconds == 0.5);
  collector.reconfigure(every(250ms), list(keep("s")));
  const double switch2 = rig.holder.current()->timestamp;
  for (int i = 0; i < 4; ++i) rig.next_tick(2);
  CHECK(rig.holder.current()->interval_seconds == 0.25);
  collector.stop();

  auto h = rig.store.query({});
  REQUIRE(h.timestamps.size() == 11);
  // In milliseconds: unix seconds as doubles are not exact.
  auto ms = [](double s) { return std::llround(s * 1000); };
  for (std::size_t i = 1; i < h.timestamps.size(); ++i) {
    const auto ts = ms(h.timestamps[i]), step = ts - ms(h.timestamps[i - 1]);
    INFO("sample " << i << " at " << ts << " ms, " << step << " ms after the one before");
    CHECK(step > 0);
    const std::int64_t iv = ts <= ms(switch1) ? 200 : ts <= ms(switch2) ? 500 : 250;
    CHECK(step <= iv);
    CHECK(ts % iv == 0);  // on the grid of the interval in force
  }
  // The first point of the new grid after the latest sample: 600 ms -> 1000, 2000 -> 2250.
  CHECK(stamps(rig.store)[4] == kStartMs + 1000);
  CHECK(stamps(rig.store)[7] == kStartMs + 2250);
  CHECK(value_of(report(*rig.holder.current(), "s")) == static_cast<double>(h.timestamps.size()));
  CHECK(collector.stats().missed_ticks == 0);
}

TEST_CASE(
    "collector: a tick held up past several boundaries skips them, counts them, and the next "
    "is on the grid") {
  Rig rig;
  auto s = std::make_shared<Probe>(), gate = std::make_shared<Probe>();
  gate->hold = true;
  gate->passes = 1;  // its first call returns, its second is held
  Collector collector(every(1s), list(spec("s", s), spec("gate", gate)), rig.store, rig.holder,
                      rig.log, rig.clock);
  ReleaseAtEnd release{{gate}};
  const auto t0 = rig.clock.steady_now();
  collector.start();
  REQUIRE(eventually([&] { return rig.sequence() == 1; }));
  CHECK(rig.settle(2) == t0 + 1s);
  rig.clock.advance_to(t0 + 1s);
  REQUIRE(eventually([&] { return gate->calls == 2; }));
  rig.settle(1);
  // The clock jumps 5.5 s while the tick of 1 s waits for gate: that tick ends, four boundaries
  // (2, 3, 4 and 5 s) have wholly passed, and the tick due at 6 s is taken at once, on the grid.
  rig.clock.advance_to(t0 + 6500ms);
  REQUIRE(eventually([&] { return rig.sequence() == 3; }));
  CHECK(rig.settle(2) == t0 + 7s);
  CHECK(collector.stats().missed_ticks == 4);
  CHECK(stamps(rig.store) == std::vector<std::int64_t>{kStartMs, kStartMs + 1000, kStartMs + 6000});
  CHECK_THAT(report(*rig.holder.current(), "gate").message,
             Catch::StartsWith("timed out after 1s"));
  gate->release();
  collector.stop();
  CHECK(collector.abandoned() == 0);
}

TEST_CASE(
    "collector: a wall clock stepped by more than an interval is followed, stamps stay "
    "increasing") {
  Rig rig;
  auto probe = std::make_shared<Probe>();
  Collector collector(every(1s), list(spec("s", probe)), rig.store, rig.holder, rig.log, rig.clock);
  collector.start();
  REQUIRE(eventually([&] { return rig.sequence() == 1; }));
  rig.settle(2);               // the collector waits for its next tick (aligned before the step)
  rig.clock.step_wall(3600s);  // NTP, an hour on
  rig.next_tick(2);
  rig.clock.step_wall(-7200s);  // and two hours back
  rig.next_tick(2);
  collector.stop();
  CHECK(stamps(rig.store) ==
        std::vector<std::int64_t>{kStartMs, kStartMs + 3'601'000, kStartMs + 3'602'000});
  CHECK(collector.stats().missed_ticks == 0);
}

namespace {
std::vector<std::string> thread_names() {
  std::vector<std::string> out;
  for (auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    out.push_back(name);
  }
  return out;
}

std::size_t threads_named(const std::string& name) {
  auto all = thread_names();
  return static_cast<std::size_t>(std::count(all.begin(), all.end(), name));
}
}  // namespace

TEST_CASE("collector: the collector thread and the sampler are named") {
  Rig rig;
  auto probe = std::make_shared<Probe>();
  Collector collector(every(200ms), list(spec("a-long-sensor-name", probe)), rig.store, rig.holder,
                      rig.log, rig.clock);
  collector.start();
  REQUIRE(eventually([&] { return probe->calls >= 1; }));
  CHECK(threads_named("kiwi-collector") == 1);
  CHECK(threads_named("kiwi-sampler") == 1);
  collector.stop();
}

TEST_CASE(
    "collector: one sampler thread reads a whole tick, and a slow sensor hands the rest to "
    "another, named after it until it returns") {
  Rig rig;
  auto a = std::make_shared<Probe>(), b = std::make_shared<Probe>(), c = std::make_shared<Probe>();
  Collector collector(every(400ms), list(spec("a", a), spec("b", b), spec("c", c)), rig.store,
                      rig.holder, rig.log, rig.clock);
  ReleaseAtEnd release{{b}};
  // Every reading of a tick on one thread, and one sampler in all: one thread woken per tick.
  // (The clock does not move while they run, so no call is ever kHandOffAfter long.)
  for (int i = 0; i < 5; ++i) {
    collector.tick(i);
    CHECK(a->sampled_on() == b->sampled_on());
    CHECK(b->sampled_on() == c->sampled_on());
  }
  CHECK(threads_named("kiwi-sampler") == 1);

  b->hold_calls();
  const auto t5 = rig.clock.steady_now();
  {
    TickThread tick(collector, rig.clock, 5);
    REQUIRE(eventually([&] { return b->calls == 6; }));
    // c, queued behind b, is read in this tick all the same, kHandOffAfter later, and on another
    // thread; b is within its timeout: the tick waits for its budget, 200 ms.
    CHECK(rig.settle(1) == t5 + Collector::kHandOffAfter);
    CHECK(c->calls == 5);
    rig.clock.advance(Collector::kHandOffAfter);
    REQUIRE(eventually([&] { return c->returns == 6; }));
    rig.settle(2);
    tick.finish_at(t5 + 200ms);
  }
  auto snap = rig.holder.current();
  CHECK(value_of(report(*snap, "a")) == 6);
  CHECK(value_of(report(*snap, "c")) == 6);
  CHECK(value_of(report(*snap, "b")) == 5);  // its reading of tick 4, carried
  CHECK(c->sampled_on() != b->sampled_on());
  CHECK(threads_named("kiwi-s:b") == 1);  // `top -H` shows which sensor holds a thread
  b->release();
  REQUIRE(eventually([&] { return b->returns == 6; }));
  REQUIRE(eventually([&] { return threads_named("kiwi-s:b") == 0; }));
  // The pool keeps its threads (at least the one handed the queue): a tick wakes one of them.
  const std::size_t grown = threads_named("kiwi-sampler");
  CHECK(grown >= 2);
  collector.tick(6);
  collector.tick(7);
  CHECK(threads_named("kiwi-sampler") == grown);
  CHECK(a->overlaps + b->overlaps + c->overlaps == 0);
}

TEST_CASE("collector: a sensor stuck in the very first call holds up the others 20 ms at most") {
  // The first sampler, started with the collector, is stuck in its very first call: it hands off
  // all the same, when the clock passes 20 ms and not before.
  Rig rig;
  auto stuck = std::make_shared<Probe>(), after = std::make_shared<Probe>();
  stuck->hold = true;
  Collector collector(every(400ms), list(spec("stuck", stuck), spec("after", after)), rig.store,
                      rig.holder, rig.log, rig.clock);
  ReleaseAtEnd release{{stuck}};
  const auto t0 = rig.clock.steady_now();
  TickThread tick(collector, rig.clock, 0);
  REQUIRE(eventually([&] { return stuck->calls == 1; }));
  CHECK(rig.settle(1) == t0 + 20ms);
  rig.clock.advance(19ms);
  CHECK(rig.settle(1) == t0 + 20ms);
  CHECK(after->calls == 0);
  rig.clock.advance(1ms);
  REQUIRE(eventually([&] { return after->returns == 1; }));
  rig.settle(2);
  tick.finish_at(t0 + 200ms);
  CHECK(value_of(report(*rig.holder.current(), "after")) == 1);
  CHECK(after->sampled_on() != stuck->sampled_on());
}
