// Millisecond arithmetic shared by the store's layers: the grid of minutes, hours and buckets.
#pragma once

#include <cstdint>

namespace kiwi::agent {

// The multiple of `step` at or before `t` (also for negative t).
inline std::int64_t floor_to(std::int64_t t, std::int64_t step) {
  return t - ((t % step) + step) % step;
}

// t - d (d >= 0), or INT64_MIN where that would go below it: the start of a lookback from a
// window that may begin in the far past.
inline std::int64_t minus_saturating(std::int64_t t, std::int64_t d) {
  return t < INT64_MIN + d ? INT64_MIN : t - d;
}

}  // namespace kiwi::agent
