// The rows that summarise minutes, hours and days (schema.hpp), as their readers need them. The
// writer makes them (Writer, rollup.cpp); the query side reads them (query.cpp).
//
// Minute rows (in memory, MinuteRows; in the rollups table of an older agent's file): sample_codec
// pairs keyed id * 5 + k, k = 0 mean, 1 min, 2 max, 3 last, 4 count;
// key 0 (no series has id 0) is the offset of the minute's first sample from its start, in ms
// (agents before it ignore key 0, and a row without it reads as offset 0). One row per group of
// Store::kGroupSeries ids (ids 64g .. 64g + 63), keyed minute + g; group 0 has key 0, so it is
// there for every minute that has a sample: it says that the minute has a rollup, and where it
// starts.
//
// Hour rows: for each series id > 0, sample_codec pairs keyed m * 5 + k (m the minute of the hour,
// 0..59; k as in a minute row), at ts = hour + id; and at ts = hour + 0 ("series 0") the hour's
// minute map: key m, value the offset of minute m's first sample, for every minute that has a
// rollup (a group 0 row). Made from the hour's minute rows only, so they say exactly what those
// say.
//
// Day rows: the same shape one level up, at ts = day + id: keys h * 5 + k (h the hour of the day,
// 0..23; k = 0 the sum of the hour's values, exact, then min, max, last, count), and at ts = day
// the hour map (h -> offset of the hour's first sample). Not deflated (rollup.cpp, fold_day()).
#pragma once

#include <cstdint>
#include <string_view>

#include "store/sample_codec.hpp"

namespace kiwi::agent {

// Key 0 of a minute row: the offset of the minute's first sample, in ms; 0 for a row without it.
std::int64_t first_sample_offset(std::string_view blob);

// Calls fn(x, parts, count) for each summary of a row (unpacked) keyed x * 5 + k: parts[0] the
// mean (the sum in a day row), [1] min, [2] max, [3] last; the count (k = 4) comes last and closes
// it. x is the series id in a minute row, the minute or hour in an hour or day row (whose key 0,
// in a minute row, is the first-sample offset: no summary). Throws StoreError on a malformed row.
template <class Fn>
void for_each_summary(std::string_view blob, Fn&& fn) {
  double parts[4] = {};
  sample_codec::decode(blob, [&](std::uint32_t key, double v) {
    if (key % 5 < 4)
      parts[key % 5] = v;
    else
      fn(key / 5, static_cast<const double*>(parts), v);
  });
}

}  // namespace kiwi::agent
