#include "base/clock.hpp"

#include <thread>

namespace kiwi::agent {

namespace {

class RealClock final : public Clock {
 public:
  using Clock::wait_until;
  SteadyTime steady_now() const override { return std::chrono::steady_clock::now(); }
  WallTime wall_now() const override { return std::chrono::system_clock::now(); }
  void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                  SteadyTime until) override {
    cv.wait_until(lock, until);
  }
  void sleep_until(SteadyTime until) override { std::this_thread::sleep_until(until); }
};

}  // namespace

Clock& real_clock() {
  static RealClock clock;
  return clock;
}

}  // namespace kiwi::agent
