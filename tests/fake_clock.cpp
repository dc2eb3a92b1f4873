#include "fake_clock.hpp"

#include <algorithm>
#include <vector>

namespace kiwi::agent {

FakeClock::FakeClock(WallTime wall_start)
    : steady_(std::chrono::steady_clock::now()), wall_(wall_start) {}

Clock::SteadyTime FakeClock::steady_now() const {
  std::lock_guard lock(mutex_);
  return steady_;
}

Clock::WallTime FakeClock::wall_now() const {
  std::lock_guard lock(mutex_);
  return wall_;
}

// The waiter is listed before it looks at the time, both under mutex_, and keeps its own mutex
// until cv.wait() lets go of it: advance() either moved the time before it looked, or finds it
// listed and takes its mutex to notify it, which it gets only once the waiter waits. No wakeup is
// lost.
void FakeClock::wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                           SteadyTime until) {
  std::list<Waiter>::iterator me;
  {
    std::lock_guard guard(mutex_);
    if (steady_ >= until) return;
    me = waiters_.insert(waiters_.end(), Waiter{&cv, lock.mutex(), until});
  }
  changed_.notify_all();
  cv.wait(lock);
  // Unlisted once advance() is done with it (the condition variable and its mutex may go as soon
  // as this returns), without its mutex, which advance() takes to notify (a spurious wakeup's
  // window, which every caller allows for).
  lock.unlock();
  {
    std::unique_lock guard(mutex_);
    changed_.wait(guard, [&] { return me->notifying == 0; });
    waiters_.erase(me);
  }
  changed_.notify_all();
  lock.lock();
}

void FakeClock::sleep_until(SteadyTime until) {
  std::mutex mutex;
  std::condition_variable cv;
  std::unique_lock lock(mutex);
  while (steady_now() < until) wait_until(cv, lock, until);
}

void FakeClock::advance(std::chrono::nanoseconds d) {
  advance_to(steady_now() + d);
}

void FakeClock::advance_to(SteadyTime t) {
  std::vector<std::list<Waiter>::iterator> due;
  {
    std::lock_guard guard(mutex_);
    if (t <= steady_) return;
    wall_ += t - steady_;
    steady_ = t;
    for (auto it = waiters_.begin(); it != waiters_.end(); ++it)
      if (it->until <= t) {
        ++it->notifying;
        due.push_back(it);
      }
  }
  // Each waiter's mutex without mutex_, which a waiter takes while holding its own.
  for (auto it : due) {
    std::lock_guard guard(*it->mutex);
    it->cv->notify_all();
  }
  {
    std::lock_guard guard(mutex_);
    for (auto it : due) --it->notifying;
  }
  changed_.notify_all();
}

void FakeClock::step_wall(std::chrono::nanoseconds d) {
  std::lock_guard guard(mutex_);
  wall_ += std::chrono::duration_cast<WallTime::duration>(d);
}

std::size_t FakeClock::waiting_after_now() const {
  return static_cast<std::size_t>(std::count_if(
      waiters_.begin(), waiters_.end(), [&](const Waiter& w) { return w.until > steady_; }));
}

std::size_t FakeClock::waiters() const {
  std::lock_guard guard(mutex_);
  return waiting_after_now();
}

std::optional<Clock::SteadyTime> FakeClock::await_waiters(std::size_t n,
                                                          std::chrono::milliseconds limit) {
  std::unique_lock guard(mutex_);
  // Real time: this is the test's side, waiting for the threads under test to get there.
  if (!changed_.wait_for(guard, limit, [&] { return waiting_after_now() >= n; }))
    return std::nullopt;
  SteadyTime earliest = SteadyTime::max();
  for (const Waiter& w : waiters_)
    if (w.until > steady_) earliest = std::min(earliest, w.until);
  return earliest;
}

}  // namespace kiwi::agent
