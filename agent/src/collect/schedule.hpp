// The schedule of the samples: tick n is stamped n x interval (unix milliseconds), so every
// sample sits on the interval grid of the wall clock, strictly later than the one before; the
// collector thread takes the ticks on the steady clock, aligned to that grid.
#pragma once

#include <cstdint>

#include "base/clock.hpp"
#include "base/duration.hpp"

namespace kiwi::agent {

class TickSchedule {
 public:
  // A tick as it is taken: its number on the grid and its stamp (index x interval).
  struct Tick {
    std::int64_t index = 0;
    std::int64_t ts_ms = 0;
  };

  explicit TickSchedule(Clock& clock) : clock_(clock) {}

  // The interval boundary nearest to the wall clock now, as a tick number.
  std::int64_t nearest_tick(Millis interval) const;
  // Tick number `tick_index` as it is taken: a stamp not after the last one taken (the wall clock
  // went back, or a coarser grid came before a reconfiguration) becomes the next grid point.
  // Records it as the latest stamp.
  Tick take(std::int64_t tick_index, Millis interval);
  // The stamp of the latest tick taken; INT64_MIN before the first.
  std::int64_t last_stamp() const { return last_ts_ms_; }

  // The collector thread's timing. align(): the next tick is the first grid point after the
  // latest stamp, due on the steady clock when the wall clock reaches it.
  void align(Millis interval);
  // When the next tick is due, on the steady clock.
  Clock::SteadyTime next_due() const { return next_; }
  // The number of the tick due now: the next one on the grid, or the wall clock's nearest if the
  // wall clock was stepped by more than an interval. Grid points the steady clock has wholly
  // passed since the tick was due (the thread held up before it: a loaded machine, a frozen
  // process) are skipped, and their number added to `missed`.
  std::int64_t due_index(Millis interval, std::uint64_t& missed);
  // After a tick: the next grid point. Returns how many grid points were skipped because the
  // thread was a whole interval or more behind (missed ticks).
  std::uint64_t advance(Millis interval);

 private:
  // Skips the grid points the steady clock has wholly passed; returns how many.
  std::uint64_t skip_passed(Millis interval);

  Clock& clock_;
  std::int64_t last_ts_ms_ = INT64_MIN;  // stamp of the latest tick taken
  std::int64_t index_ = 0;               // the next tick's number on the grid
  Clock::SteadyTime next_{};             // when it is due
};

}  // namespace kiwi::agent
