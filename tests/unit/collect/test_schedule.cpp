// The tick schedule on a fake clock: the grid, the alignment to the wall clock, a wall-clock step
// and the ticks missed when the steady clock jumps.
#include <catch2/catch.hpp>

#include "collect/schedule.hpp"
#include "fake_clock.hpp"

using namespace kiwi::agent;
using namespace std::chrono_literals;

namespace {
// The fake clock's wall clock when it starts (2026-12-01T10:00:00Z), in unix ms.
constexpr std::int64_t kStartMs = 1'796'119'200'000;

// The tick due now, where the thread was not held up (none missed before it).
std::int64_t due_now(TickSchedule& schedule, kiwi::agent::Millis interval) {
  std::uint64_t missed = 0;
  const std::int64_t index = schedule.due_index(interval, missed);
  CHECK(missed == 0);
  return index;
}
}  // namespace

TEST_CASE(
    "schedule: a tick is stamped with the nearest boundary, the next one with the one after") {
  // Started 700 ms into a second: the first tick is the coming boundary's, the next is due when
  // the wall clock reaches the boundary after it.
  FakeClock clock(FakeClock::kDefaultWallStart + 700ms);
  TickSchedule schedule(clock);
  const auto t0 = clock.steady_now();
  const auto first = schedule.take(schedule.nearest_tick(1s), 1s);
  CHECK(first.ts_ms == kStartMs + 1000);
  CHECK(first.index == first.ts_ms / 1000);
  schedule.align(1s);
  CHECK(schedule.next_due() == t0 + 1300ms);  // wall 10:00:02.000
  clock.advance_to(schedule.next_due());
  CHECK(due_now(schedule, 1s) == first.index + 1);
  CHECK(schedule.take(due_now(schedule, 1s), 1s).ts_ms == kStartMs + 2000);
  CHECK(schedule.advance(1s) == 0);
  CHECK(schedule.next_due() == t0 + 2300ms);
  CHECK(due_now(schedule, 1s) == first.index + 2);
}

TEST_CASE("schedule: stamps sit on the grid, strictly later than the one before") {
  FakeClock clock;
  TickSchedule schedule(clock);
  CHECK(schedule.last_stamp() == INT64_MIN);
  CHECK(schedule.take(10, 2s).ts_ms == 20'000);
  CHECK(schedule.take(10, 2s).ts_ms == 22'000);  // already taken: the next grid point
  CHECK(schedule.take(3, 2s).ts_ms == 24'000);   // the wall clock went back
  CHECK(schedule.take(3, 2s).index == 13);
  // A finer grid after a coarser one: the first of its points after the latest stamp.
  CHECK(schedule.take(40, 500ms).ts_ms == 26'500);
  CHECK(schedule.take(60, 500ms).ts_ms == 30'000);
  CHECK(schedule.last_stamp() == 30'000);
}

TEST_CASE(
    "schedule: a steady clock a whole interval or more behind skips the ticks wholly passed") {
  FakeClock clock;
  TickSchedule schedule(clock);
  schedule.take(schedule.nearest_tick(1s), 1s);
  schedule.align(1s);
  const auto due = schedule.next_due();
  const auto index = due_now(schedule, 1s);
  // The tick ran 1.5 intervals past its boundary: the next one is due at once, none is missed.
  clock.advance_to(due + 1500ms);
  CHECK(schedule.advance(1s) == 0);
  CHECK(schedule.next_due() == due + 1s);
  // Suspended for 5.2 s: the four boundaries wholly passed are skipped and counted.
  clock.advance_to(due + 1s + 5200ms);
  CHECK(schedule.advance(1s) == 4);
  CHECK(schedule.next_due() == due + 6s);
  CHECK(schedule.next_due() <= clock.steady_now());
  CHECK(due_now(schedule, 1s) == index + 6);
}

TEST_CASE("schedule: a wall clock stepped by more than an interval is followed from then on") {
  FakeClock clock;
  TickSchedule schedule(clock);
  const auto first = schedule.take(schedule.nearest_tick(1s), 1s);
  schedule.align(1s);
  clock.advance_to(schedule.next_due());
  // A step of one interval is not followed (a tick late by its own length is not a step).
  clock.step_wall(1s);
  CHECK(due_now(schedule, 1s) == first.index + 1);
  // Forward by a minute: the next tick is the wall clock's.
  clock.step_wall(60s);
  CHECK(due_now(schedule, 1s) == first.index + 62);
  CHECK(schedule.take(due_now(schedule, 1s), 1s).ts_ms == kStartMs + 62'000);
  schedule.advance(1s);
  // Back by an hour: the tick number follows the wall clock, the stamp stays after the last one.
  clock.advance_to(schedule.next_due());
  clock.step_wall(-3600s);
  const std::int64_t back = due_now(schedule, 1s);
  CHECK(back == first.index + 63 - 3600);
  CHECK(schedule.take(back, 1s).ts_ms == kStartMs + 63'000);
}

TEST_CASE(
    "schedule: a thread held up before its tick takes the tick due now, and its stamps do not run "
    "ahead") {
  // The collector thread woke 5.5 intervals after its tick was due (a loaded machine, a frozen
  // process): the steady and the wall clock moved on together, which is no wall-clock step.
  FakeClock clock;
  TickSchedule schedule(clock);
  const auto first = schedule.take(schedule.nearest_tick(1s), 1s);
  schedule.align(1s);
  clock.advance_to(schedule.next_due() + 5500ms);
  std::uint64_t missed = 0;
  const std::int64_t index = schedule.due_index(1s, missed);
  CHECK(missed == 5);  // the boundaries first + 1 .. first + 5 passed without a tick
  CHECK(index == first.index + 6);
  const auto late = schedule.take(index, 1s);
  CHECK(late.ts_ms <= clock.wall_ms());
  CHECK(clock.wall_ms() - late.ts_ms < 1000);
  CHECK(schedule.advance(1s) == 0);
  // The ticks after it are on time, each stamped with the boundary it is due at.
  for (int i = 1; i <= 3; ++i) {
    clock.advance_to(schedule.next_due());
    const auto next = schedule.take(due_now(schedule, 1s), 1s);
    CHECK(next.index == first.index + 6 + i);
    CHECK(next.ts_ms == clock.wall_ms());
    CHECK(schedule.advance(1s) == 0);
  }
}

TEST_CASE(
    "schedule: a wall clock stepped between a tick and the alignment is followed, nothing missed") {
  // The collector takes its first tick, then aligns: NTP stepping the clock in between must not
  // put the next tick an hour in the past (3,599 ticks counted as missed) or an hour ahead.
  for (const auto step : {3600s, -3600s}) {
    FakeClock clock;
    TickSchedule schedule(clock);
    const auto t0 = clock.steady_now();
    const auto first = schedule.take(schedule.nearest_tick(1s), 1s);
    clock.step_wall(step);
    schedule.align(1s);
    CHECK(schedule.next_due() >= t0);
    CHECK(schedule.next_due() <= t0 + 2s);
    clock.advance_to(schedule.next_due());
    std::uint64_t missed = 0;
    const auto tick = schedule.take(schedule.due_index(1s, missed), 1s);
    CHECK(missed == 0);
    CHECK(tick.ts_ms > first.ts_ms);
    if (step > 0s) CHECK(tick.ts_ms >= first.ts_ms + 3'599'000);
  }
}
