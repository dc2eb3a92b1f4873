#include "collect/schedule.hpp"

#include <algorithm>
#include <cstdlib>

namespace kiwi::agent {

std::int64_t TickSchedule::nearest_tick(Millis interval) const {
  const std::int64_t iv = interval.count();
  return (clock_.wall_ms() + iv / 2) / iv;
}

TickSchedule::Tick TickSchedule::take(std::int64_t tick_index, Millis interval) {
  const std::int64_t iv = interval.count();
  // Every sample sits on the interval grid, strictly later than the one before (docs/api.md): a
  // stamp already taken (the wall clock went back) or passed (a coarser grid before a
  // reconfiguration) becomes the next grid point.
  if (last_ts_ms_ != INT64_MIN && tick_index * iv <= last_ts_ms_) tick_index = last_ts_ms_ / iv + 1;
  last_ts_ms_ = tick_index * iv;
  return {tick_index, last_ts_ms_};
}

// The schedule goes on from the latest sample: the next grid point after it, on a steady clock
// aligned to the wall clock (here and after a reconfiguration only), so a wall-clock step (NTP)
// neither bunches nor skips ticks. Started late in a second, the first tick is stamped with the
// coming boundary and the next one with the boundary after. The wall clock stepped since the
// latest sample (NTP, between it and this call) would put that point far in the past or future:
// it is due at once or within two intervals, and due_index() follows the step.
void TickSchedule::align(Millis interval) {
  const std::int64_t iv = interval.count();
  index_ = last_ts_ms_ / iv + 1;
  const std::int64_t wait_ms = std::clamp<std::int64_t>(index_ * iv - clock_.wall_ms(), 0, 2 * iv);
  next_ = clock_.steady_now() + Millis(wait_ms);
}

std::int64_t TickSchedule::due_index(Millis interval, std::uint64_t& missed) {
  // Held up since the tick was due: the steady clock and the wall clock moved on together, so
  // this is not a wall-clock step; the tick taken is the one due now, the ones passed are missed.
  missed += skip_passed(interval);
  // The wall clock was stepped by more than an interval: stamp by it from now on (take() keeps
  // the stamps strictly increasing if it went back).
  if (std::int64_t wall = nearest_tick(interval); std::llabs(wall - index_) > 1) index_ = wall;
  return index_;
}

std::uint64_t TickSchedule::advance(Millis interval) {
  ++index_;
  next_ += interval;
  return skip_passed(interval);
}

// A whole interval behind (a suspended machine, a stuck disk, a thread held up): skip the grid
// points that have wholly passed. A tick that only ran past the next boundary (its sensors used
// the publish budget and writing took long) is followed at once by the next one, which is not
// missed.
std::uint64_t TickSchedule::skip_passed(Millis interval) {
  const auto now = clock_.steady_now();
  if (now < next_ + interval) return 0;
  const auto behind = (now - next_) / interval;
  index_ += behind;
  next_ += behind * interval;
  return static_cast<std::uint64_t>(behind);
}

}  // namespace kiwi::agent
