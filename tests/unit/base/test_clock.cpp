// The clocks: the fake one moves only when told and wakes its waiters then; the real one waits on
// a condition variable as std::condition_variable does.
#include <catch2/catch.hpp>
#include <thread>

#include "base/clock.hpp"
#include "fake_clock.hpp"

using namespace kiwi::agent;
using namespace std::chrono_literals;

namespace {

// A thread waiting on a clock for `until`, or for `flag`.
struct Waiting {
  Clock& clock;
  Clock::SteadyTime until;
  std::mutex mutex;
  std::condition_variable cv;
  bool flag = false;       // under mutex
  bool returned = false;   // under mutex
  bool flag_seen = false;  // under mutex: what wait_until returned
  std::thread thread;

  Waiting(Clock& c, Clock::SteadyTime u) : clock(c), until(u) {
    thread = std::thread([this] {
      std::unique_lock lock(mutex);
      flag_seen = clock.wait_until(cv, lock, until, [&] { return flag; });
      returned = true;
    });
  }
  ~Waiting() {
    if (thread.joinable()) thread.join();
  }
  bool has_returned() {
    std::lock_guard lock(mutex);
    return returned;
  }
  void notify() {
    {
      std::lock_guard lock(mutex);
      flag = true;
    }
    cv.notify_all();
  }
};

}  // namespace

TEST_CASE("fake clock: a thread waiting for a time wakes when the clock reaches it, not before") {
  FakeClock clock;
  const auto t0 = clock.steady_now();
  Waiting w(clock, t0 + 100ms);
  CHECK(clock.await_waiters() == t0 + 100ms);
  clock.advance(99ms);
  // Still listed for a time after now: not woken, so not returned.
  CHECK(clock.await_waiters() == t0 + 100ms);
  CHECK_FALSE(w.has_returned());
  clock.advance(1ms);
  w.thread.join();
  CHECK(w.returned);
  CHECK_FALSE(w.flag_seen);
  CHECK(clock.steady_now() == t0 + 100ms);
  CHECK(clock.waiters() == 0);
}

TEST_CASE("fake clock: a notification wakes a waiter without the clock moving") {
  FakeClock clock;
  const auto t0 = clock.steady_now();
  Waiting w(clock, Clock::SteadyTime::max());
  CHECK(clock.await_waiters() == Clock::SteadyTime::max());
  w.notify();
  w.thread.join();
  CHECK(w.flag_seen);
  CHECK(clock.steady_now() == t0);
}

TEST_CASE("fake clock: a time already passed does not wait, and sleep_until waits for advance()") {
  FakeClock clock;
  const auto t0 = clock.steady_now();
  std::mutex m;
  std::condition_variable cv;
  std::unique_lock lock(m);
  CHECK_FALSE(clock.wait_until(cv, lock, t0, [] { return false; }));
  lock.unlock();
  std::thread sleeper([&] { clock.sleep_for(500ms); });
  CHECK(clock.await_waiters() == t0 + 500ms);
  clock.advance_to(t0 + 2s);
  sleeper.join();
  CHECK(clock.steady_now() == t0 + 2s);
  clock.advance_to(t0 + 1s);  // not after now: nothing
  CHECK(clock.steady_now() == t0 + 2s);
}

TEST_CASE("fake clock: advance() moves both clocks, step_wall() the wall clock alone") {
  FakeClock clock;
  CHECK(clock.wall_now() == FakeClock::kDefaultWallStart);
  CHECK(clock.wall_ms() == 1'796'119'200'000);
  const auto t0 = clock.steady_now();
  clock.advance(1500ms);
  CHECK(clock.steady_now() == t0 + 1500ms);
  CHECK(clock.wall_ms() == 1'796'119'201'500);
  clock.step_wall(-10s);  // NTP stepped it back
  CHECK(clock.steady_now() == t0 + 1500ms);
  CHECK(clock.wall_ms() == 1'796'119'191'500);
}

TEST_CASE("fake clock: many waiters, each woken at its own time") {
  FakeClock clock;
  const auto t0 = clock.steady_now();
  Waiting a(clock, t0 + 10ms), b(clock, t0 + 20ms), c(clock, t0 + 30ms);
  REQUIRE(clock.await_waiters(3) == t0 + 10ms);
  clock.advance(15ms);
  a.thread.join();
  CHECK(clock.await_waiters(2) == t0 + 20ms);
  CHECK_FALSE(b.has_returned());
  clock.advance(100ms);
  b.thread.join();
  c.thread.join();
  CHECK(clock.waiters() == 0);
}

TEST_CASE("real clock: wait_until returns on a notification, and at once for a time passed") {
  Clock& clock = real_clock();
  CHECK(clock.wall_ms() > 1'700'000'000'000);
  std::mutex m;
  std::condition_variable cv;
  {
    std::unique_lock lock(m);
    CHECK_FALSE(clock.wait_until(cv, lock, clock.steady_now() - 1s, [] { return false; }));
  }
  Waiting w(clock, Clock::SteadyTime::max());
  w.notify();
  w.thread.join();
  CHECK(w.flag_seen);
}
