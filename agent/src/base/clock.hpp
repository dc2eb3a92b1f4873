// Time as a dependency (Envoy's TimeSource): a component that schedules or times out takes a
// Clock and reads the time and waits only through it. The agent gives it real_clock(); a test
// gives it a FakeClock (tests/fake_clock.hpp), which moves only when the test moves it and wakes
// the threads waiting on it then, so a schedule, a deadline or a hand-off is tested without
// sleeping and without asserting on how long anything took.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace kiwi::agent {

class Clock {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  using WallTime = std::chrono::system_clock::time_point;

  virtual ~Clock() = default;

  // The monotonic clock: schedules, deadlines, how long a call took.
  virtual SteadyTime steady_now() const = 0;
  // The wall clock: timestamps of samples and of events. May be stepped (NTP, an administrator).
  virtual WallTime wall_now() const = 0;
  // Blocks on `cv`, whose mutex `lock` holds, until `cv` is notified or this clock reaches
  // `until` (SteadyTime::max(): no limit). As condition_variable::wait_until, it may also return
  // for no reason: callers look at their condition again. `lock` is held on return.
  virtual void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                          SteadyTime until) = 0;
  // Blocks the calling thread until this clock reaches `until`.
  virtual void sleep_until(SteadyTime until) = 0;

  // wait_until() until `done()` holds or this clock reaches `until`; returns done().
  template <class Done>
  bool wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, SteadyTime until,
                  Done done) {
    while (!done()) {
      if (steady_now() >= until) return done();
      wait_until(cv, lock, until);
    }
    return true;
  }
  template <class Rep, class Period>
  void sleep_for(std::chrono::duration<Rep, Period> d) {
    sleep_until(steady_now() + d);
  }
  // The wall clock in unix milliseconds.
  std::int64_t wall_ms() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(wall_now().time_since_epoch())
        .count();
  }
};

// The machine's clocks (std::chrono::steady_clock and system_clock); one object for the process.
Clock& real_clock();

}  // namespace kiwi::agent
