// A sensor job's life: the transitions SensorJob allows, and that any other is refused. (The
// pool's threads, hand-off and deadlines are tested through the collector: test_collector.cpp.)
#include <catch2/catch.hpp>

#include "collect/sampler_pool.hpp"

using namespace kiwi::agent;
using namespace std::chrono_literals;

namespace {
SensorJob job() {
  return SensorJob("s", "sensor s (test)", {}, "/proc");
}
}  // namespace

TEST_CASE("sensor job: queued, called, done, taken: idle again, its deadline from the call") {
  SensorJob j = job();
  const Clock::SteadyTime t0{};
  CHECK(j.state() == JobState::idle);
  CHECK_FALSE(j.busy());
  j.queue(t0, 250ms);
  CHECK(j.state() == JobState::queued);
  CHECK(j.busy());
  CHECK(j.deadline() == t0 + 250ms);  // until its call starts: from when it was posted
  j.begin_call(t0 + 20ms);
  CHECK(j.state() == JobState::in_call);
  CHECK(j.deadline() == t0 + 270ms);  // a call's timeout counts from its start
  CallOutcome out;
  out.message = "m";
  CHECK(j.end_call(out));
  CHECK(j.state() == JobState::done);
  CHECK_FALSE(j.busy());
  CHECK(j.take_outcome().message == "m");
  CHECK(j.state() == JobState::idle);
}

TEST_CASE("sensor job: retired idle, queued or in a call, it is destroyed once, by a sampler") {
  SensorJob idle = job();
  CHECK(idle.retire());  // to be queued for a sampler to destroy
  CHECK(idle.state() == JobState::doomed);
  CHECK_FALSE(idle.retire());  // retired once
  idle.begin_destroy();
  CHECK(idle.state() == JobState::destroying);
  idle.end_destroy();
  CHECK(idle.state() == JobState::destroyed);

  SensorJob queued = job();
  queued.queue({}, 1s);
  CHECK_FALSE(queued.retire());  // in the queue already
  CHECK(queued.state() == JobState::doomed);

  SensorJob calling = job();
  calling.queue({}, 1s);
  calling.begin_call({});
  CHECK_FALSE(calling.retire());
  CHECK(calling.state() == JobState::retiring);
  CHECK_FALSE(calling.end_call({}));  // its reading is not kept: it is destroyed now
  CHECK(calling.state() == JobState::destroying);
}

TEST_CASE("sensor job: stop() abandons one in a call or in its destructor, and nothing after") {
  SensorJob calling = job();
  calling.queue({}, 1s);
  calling.begin_call({});
  calling.retire();
  CHECK(calling.abandon());  // in its call: its instance is stop()'s to keep
  CHECK(calling.state() == JobState::abandoned);
  CHECK_FALSE(calling.end_call({}));  // its call returns later: nothing more is done
  CHECK(calling.state() == JobState::abandoned);

  SensorJob destroying = job();
  destroying.retire();
  destroying.begin_destroy();
  CHECK_FALSE(destroying.abandon());
  destroying.end_destroy();
  CHECK(destroying.state() == JobState::abandoned);
}

TEST_CASE("sensor job: a transition not in its table is refused, naming both states") {
  SensorJob j = job();
  CHECK_THROWS_WITH(j.begin_call({}), "sensor s: no transition from idle to in_call");
  CHECK_THROWS_WITH(j.take_outcome(), "sensor s: no transition from idle to idle");
  CHECK_THROWS_WITH(j.abandon(), "sensor s: no transition from idle to abandoned");
  j.queue({}, 1s);
  CHECK_THROWS_WITH(j.queue({}, 1s), "sensor s: no transition from queued to queued");
  CHECK(j.state() == JobState::queued);
}
