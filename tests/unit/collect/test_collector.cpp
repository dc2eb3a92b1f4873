// The collector with in-process sensors (test classes, no shared object): workers, deadlines,
// reconfiguration and stop() with a sensor that never returns.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "collect/collector.hpp"
#include "plugin/metric_check.hpp"

#include "test_support.hpp"

using namespace kiwi::agent;
using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

namespace {

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
  bool hold = false;  // sample() blocks while set
  Millis sleep{0};    // and sleeps this long
  std::atomic<int> calls{0}, returns{0}, concurrent{0}, overlaps{0};
  std::atomic<bool> destroyed{false};
  std::atomic<const void*> object{nullptr};
  std::thread::id sample_thread, destroy_thread;  // under mutex
  Steady::time_point deadline;                    // under mutex: the sink's, in the last call

  void release() {
    {
      std::lock_guard lock(mutex);
      hold = false;
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
      probe->cv.wait(lock, [&] { return !probe->hold; });
    }
    if (probe->sleep.count()) std::this_thread::sleep_for(probe->sleep);
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

template <class Pred>
bool eventually(Pred pred, Millis limit = Millis(5000)) {
  const auto until = Steady::now() + limit;
  while (!pred()) {
    if (Steady::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

struct Rig {
  RecordingLogger log;
  kiwi_test::TempDir dir;
  Store store{(dir.path / "kiwi.db").string()};
  SnapshotHolder holder;
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

double elapsed_s(Steady::time_point from) {
  return std::chrono::duration<double>(Steady::now() - from).count();
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
                        rig.holder, rig.log);
    // Tick 0: hung is within its timeout (400 ms) when the budget (200 ms) is used up.
    auto t0 = Steady::now();
    collector.tick(0);
    CHECK(elapsed_s(t0) < 1.5);
    auto snap = rig.holder.current();
    CHECK(names(*snap) == std::vector<std::string>{"hung", "fast"});
    CHECK(report(*snap, "fast").state == kiwi::SensorState::ok);
    CHECK(value_of(report(*snap, "fast")) == 1);
    CHECK(report(*snap, "hung").state == kiwi::SensorState::no_data);
    CHECK(report(*snap, "hung").message == "first sample in progress");
    // Tick 1, or tick 2 when the call began late on a loaded machine: its deadline, 400 ms after
    // its call began, passes within the tick: error, once.
    int tick = 1;
    for (;; ++tick) {
      t0 = Steady::now();
      collector.tick(tick);
      CHECK(elapsed_s(t0) < 1.5);
      snap = rig.holder.current();
      if (report(*snap, "hung").state == kiwi::SensorState::error || tick == 2) break;
    }
    CHECK(report(*snap, "hung").state == kiwi::SensorState::error);
    CHECK_THAT(report(*snap, "hung").message, Catch::StartsWith("timed out after 400ms"));
    CHECK(report(*snap, "hung").errors_total == 1);
    CHECK(report(*snap, "hung").metrics.empty());
    CHECK(value_of(report(*snap, "fast")) == tick + 1);
    // Three ticks more: not waited for, not called again, still one error; fast is read every
    // tick.
    for (int i = tick + 1; i <= tick + 3; ++i) {
      t0 = Steady::now();
      collector.tick(i);
      CHECK(elapsed_s(t0) < 1.5);
      snap = rig.holder.current();
      CHECK(value_of(report(*snap, "fast")) == i + 1);
      CHECK(report(*snap, "fast").timestamp == snap->timestamp);
      CHECK(report(*snap, "hung").state == kiwi::SensorState::error);
      CHECK(report(*snap, "hung").errors_total == 1);
    }
    CHECK(hung->calls == 1);
    CHECK(rig.log.count("sensor hung: timed out after 400ms; not called again until its call "
                        "returns") == 1);
    // Released: its late reading is dropped, and it is sampled again at its next tick.
    hung->release();
    REQUIRE(eventually([&] { return hung->returns == 1; }));
    collector.tick(tick + 4);
    snap = rig.holder.current();
    CHECK(rig.log.count("sensor hung: returned after ") == 1);
    CHECK(rig.log.count("; sampling again") == 1);
    CHECK(hung->calls == 2);
    CHECK(report(*snap, "hung").state == kiwi::SensorState::ok);
    CHECK(value_of(report(*snap, "hung")) == 2);  // its second call; the first was discarded
    CHECK(report(*snap, "hung").errors_total == 1);
    CHECK(hung->overlaps == 0);
    // Only fast's readings were stored while hung was stuck.
    auto h = rig.store.query({});
    REQUIRE(h.timestamps.size() == static_cast<std::size_t>(tick + 5));
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
                      rig.store, rig.holder, rig.log);
  const auto t0 = Steady::now();
  collector.tick(0);
  const auto t1 = Steady::now();
  auto deadline_of = [](Probe& p) {
    std::lock_guard lock(p.mutex);
    return p.deadline;
  };
  CHECK(deadline_of(*own) >= t0 + 250ms);
  CHECK(deadline_of(*own) <= t1 + 250ms);
  CHECK(deadline_of(*by_interval) >= t0 + 400ms);
  CHECK(deadline_of(*by_interval) <= t1 + 400ms);
  CHECK(deadline_of(*every_2) >= t0 + 800ms);  // its default timeout is its own interval
  CHECK(deadline_of(*every_2) <= t1 + 800ms);
  // A sink made outside the collector has none.
  std::vector<kiwi::MetricValue> out;
  CHECK(CheckedSink(out).deadline() == Steady::time_point::max());
}

TEST_CASE("collector: a sensor three intervals slow times out at its default timeout, then again") {
  Rig rig;
  auto fast = std::make_shared<Probe>();
  auto slow = std::make_shared<Probe>();
  slow->sleep = 600ms;
  Collector collector(every(200ms), list(spec("fast", fast), spec("slow", slow)), rig.store,
                      rig.holder, rig.log);
  collector.start();
  // Timed out at 200 ms (its interval), returns at 600 ms, sampled again: at least two rounds.
  REQUIRE(eventually([&] { return rig.log.count("sensor slow: returned after") >= 2; }, 15s));
  collector.stop();
  CHECK(rig.log.count("sensor slow: timed out after 200ms; not called again until its call "
                      "returns") >= 2);
  CHECK(slow->overlaps == 0);
  CHECK(slow->calls >= 2);
  auto snap = rig.holder.current();
  CHECK(report(*snap, "slow").errors_total >= 2);
  CHECK(report(*snap, "fast").state == kiwi::SensorState::ok);
  CHECK(report(*snap, "fast").errors_total == 0);
  CHECK(collector.abandoned() == 0);
}

TEST_CASE("collector: a reading taking longer than the publish budget but within its timeout") {
  Rig rig;
  auto fast = std::make_shared<Probe>();
  auto patient = std::make_shared<Probe>();
  patient->hold = true;
  Collector collector(every(400ms), list(spec("fast", fast), spec("patient", patient, 1, 5s)),
                      rig.store, rig.holder, rig.log);
  collector.tick(10);
  auto first = rig.holder.current();
  CHECK(report(*first, "patient").state == kiwi::SensorState::no_data);
  CHECK(report(*first, "patient").message == "first sample in progress");
  collector.tick(11);  // still within 5 s: the previous report is carried
  CHECK(report(*rig.holder.current(), "patient").message == "first sample in progress");
  patient->release();
  REQUIRE(eventually([&] { return patient->returns == 1; }));
  collector.tick(12);
  auto snap = rig.holder.current();
  const auto& r = report(*snap, "patient");
  CHECK(r.state == kiwi::SensorState::ok);
  CHECK(value_of(r) == 1);
  CHECK(r.timestamp == snap->timestamp);
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
                        rig.holder, rig.log);
    collector.start();
    REQUIRE(eventually([&] { return hung->calls == 1 && rig.holder.current()->sequence >= 3; }));
    const auto t0 = Steady::now();
    collector.stop();
    const double took = elapsed_s(t0);
    CHECK(took >= 1.9);
    CHECK(took < 3.0);
    CHECK(collector.abandoned() == 1);
    CHECK(rig.log.count("sensor hung abandoned: its sample() has not returned after 2s; its "
                        "library stays loaded") == 1);
    CHECK(fast->destroyed);
    CHECK(fast->destroyed_on() == fast->sampled_on());  // on its own worker
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
                      rig.store, rig.holder, rig.log);
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
                      rig.holder, rig.log);
  collector.start();
  REQUIRE(eventually([&] { return hung->calls == 1 && rig.holder.current()->sequence >= 2; }));
  auto t0 = Steady::now();
  collector.reconfigure(every(200ms), list(keep("fast")));
  CHECK(elapsed_s(t0) < 1.5);
  const auto seq = rig.holder.current()->sequence;
  REQUIRE(eventually([&] { return rig.holder.current()->sequence >= seq + 2; }));
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

TEST_CASE("collector: a new interval re-aligns the ticks, with no gap longer than it") {
  Rig rig;
  auto probe = std::make_shared<Probe>();
  Collector collector(every(200ms), list(spec("s", probe)), rig.store, rig.holder, rig.log);
  collector.start();
  REQUIRE(eventually([&] { return rig.holder.current()->sequence >= 4; }));
  collector.reconfigure(every(500ms), list(keep("s")));
  const double switch1 = rig.holder.current()->timestamp;  // the last sample before it
  auto seq = rig.holder.current()->sequence;
  REQUIRE(eventually([&] { return rig.holder.current()->sequence >= seq + 3; }));
  CHECK(rig.holder.current()->interval_seconds == 0.5);
  collector.reconfigure(every(250ms), list(keep("s")));
  const double switch2 = rig.holder.current()->timestamp;
  seq = rig.holder.current()->sequence;
  REQUIRE(eventually([&] { return rig.holder.current()->sequence >= seq + 4; }));
  CHECK(rig.holder.current()->interval_seconds == 0.25);
  collector.stop();

  auto h = rig.store.query({});
  REQUIRE(h.timestamps.size() >= 11);
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
  CHECK(value_of(report(*rig.holder.current(), "s")) == static_cast<double>(h.timestamps.size()));
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
                      rig.log);
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
                      rig.holder, rig.log);
  // Every reading of a tick on one thread, and one sampler in all: one thread woken per tick.
  // (A VM that stops this process for kHandOffAfter inside a call makes a second sampler, so the
  // three readings of one tick on one thread are what is asked, of any of five ticks.)
  int one_thread = 0;
  for (int i = 0; i < 5; ++i) {
    collector.tick(i);
    one_thread += a->sampled_on() == b->sampled_on() && b->sampled_on() == c->sampled_on();
  }
  CHECK(one_thread >= 1);
  const std::size_t pool = threads_named("kiwi-sampler");
  CHECK(pool <= 1 + static_cast<std::size_t>(5 - one_thread));

  b->hold = true;
  const auto t0 = Steady::now();
  collector.tick(5);
  // c, queued behind b, was read in this tick all the same, kHandOffAfter later at most (plus
  // the time a thread takes to start), and on another thread.
  CHECK(elapsed_s(t0) < 0.3);  // b is within its timeout: the tick waits for its budget, 200 ms
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
  // The first tick starts the first sampler: one stuck in its first call hands off all the same.
  Rig rig;
  auto stuck = std::make_shared<Probe>(), after = std::make_shared<Probe>();
  stuck->hold = true;
  Collector collector(every(400ms), list(spec("stuck", stuck), spec("after", after)), rig.store,
                      rig.holder, rig.log);
  collector.tick(0);
  CHECK(value_of(report(*rig.holder.current(), "after")) == 1);
  CHECK(after->sampled_on() != stuck->sampled_on());
  stuck->release();
}
