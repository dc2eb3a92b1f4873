// The rows that summarise minutes and hours (schema.hpp), as their readers need them. The writer
// makes them (Writer, rollup.cpp); the query side reads them (query.cpp).
//
// Minute rows: sample_codec pairs keyed id * 5 + k, k = 0 mean, 1 min, 2 max, 3 last, 4 count;
// key 0 (no series has id 0) is the offset of the minute's first sample from its start, in ms
// (agents before it ignore key 0, and a row without it reads as offset 0). One row per group of
// Store::kGroupSeries ids (ids 64g .. 64g + 63), keyed minute + g; group 0 has key 0, so it is
// there for every minute that has a sample: it says that the minute has a rollup, and where it
// starts.
//
// Hour rows: for each series id > 0, sample_codec pairs keyed m * 5 + k (m the minute of the hour,
// 0..59; k as in a minute row), at ts = hour + id; and at ts = hour + 0 ("series 0") the hour's
// minute map: key m, value the offset of minute m's first sample, for every minute that has a
// rollup (a group 0 row). Made from the minute rows only, so they say exactly what those say: a
// minute without a group 0 row is missing from all of them, with the rows of its other groups (as
// a query of the minute rows reads that minute from its samples). An hour of whole-minute rows of
// a file of version 3 or before (ids beyond group 0 in a group 0 row), or one that does not
// decode, is left unfolded: queries read it from its minute rows, as before.
#pragma once

#include <cstdint>
#include <string_view>

namespace kiwi::agent {

// Key 0 of a minute row: the offset of the minute's first sample, in ms; 0 for a row without it.
std::int64_t first_sample_offset(std::string_view blob);

}  // namespace kiwi::agent
