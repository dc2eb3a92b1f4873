#include "clock_timex.hpp"

#include <algorithm>

namespace kiwi::clock {

ClockReading from_timex(int adjtimex_return, const struct timex& tx) {
  constexpr double kMicroseconds = 1e6;
  ClockReading out;
  out.synchronized = adjtimex_return != TIME_ERROR && (tx.status & STA_UNSYNC) == 0;
  out.max_error_seconds = static_cast<double>(std::max<long long>(tx.maxerror, 0)) / kMicroseconds;
  out.estimated_error_seconds =
      static_cast<double>(std::max<long long>(tx.esterror, 0)) / kMicroseconds;
  return out;
}

}  // namespace kiwi::clock
