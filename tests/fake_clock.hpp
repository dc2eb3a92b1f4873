// A clock for tests that moves only when the test moves it (Envoy's SimulatedTimeSystem). The
// component under test runs on its own real threads; a thread that waits on the clock
// (Clock::wait_until, sleep_until) is woken when advance() reaches the time it waits for, or by
// a notification as with a real clock. The test sees who waits (await_waiters) to know when the
// component has done all it can do at the time the clock shows, then moves the clock on.
#pragma once

#include <list>
#include <optional>

#include "base/clock.hpp"

namespace kiwi::agent {

class FakeClock final : public Clock {
 public:
  // 2026-12-01T10:00:00Z: on every grid an interval of whole seconds or minutes divides.
  static constexpr WallTime kDefaultWallStart{std::chrono::seconds(1'796'119'200)};

  // The steady clock starts at the real steady clock's now (deadlines handed to plugins stay
  // plausible), the wall clock at `wall_start`.
  explicit FakeClock(WallTime wall_start = kDefaultWallStart);
  FakeClock(const FakeClock&) = delete;
  FakeClock& operator=(const FakeClock&) = delete;

  using Clock::wait_until;
  SteadyTime steady_now() const override;
  WallTime wall_now() const override;
  void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                  SteadyTime until) override;
  void sleep_until(SteadyTime until) override;

  // Moves both clocks on by `d`, then wakes every thread waiting for a time up to the new now.
  void advance(std::chrono::nanoseconds d);
  // advance() to `t`; nothing if `t` is not after now.
  void advance_to(SteadyTime t);
  // Steps the wall clock alone by `d` (forward or back, as NTP does); the steady clock stays.
  void step_wall(std::chrono::nanoseconds d);

  // Threads waiting on this clock now, for a time after now.
  std::size_t waiters() const;
  // Blocks the test (up to `limit` of real time) until at least `n` threads wait on this clock
  // for a time after now; returns the earliest time one of them waits for, or nullopt at `limit`
  // (SteadyTime::max() when they all wait for a notification alone).
  std::optional<SteadyTime> await_waiters(
      std::size_t n = 1, std::chrono::milliseconds limit = std::chrono::seconds(10));

 private:
  struct Waiter {
    std::condition_variable* cv;
    std::mutex* mutex;
    SteadyTime until;
    int notifying = 0;  // advance() is notifying it: the waiter stays until that is over
  };
  std::size_t waiting_after_now() const;  // under mutex_

  mutable std::mutex mutex_;         // guards everything below
  std::condition_variable changed_;  // a waiter came or went, or a notification ended
  SteadyTime steady_;
  WallTime wall_;
  std::list<Waiter> waiters_;
};

}  // namespace kiwi::agent
