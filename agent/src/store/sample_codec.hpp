// The compact per-tick encoding, and the blocks and compressed rows built on it (the bytes of the
// blobs in the tables of schema.hpp); exposed for tests and the fuzzer. The formats themselves are
// described in sample_codec_impl.hpp, beside decode().
#pragma once

#include <cstdint>
#include <kiwi/model.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiwi::agent {

// The longest a block may span (last - ts): readers look this far before a window for the block
// that may run into it. Five minutes, the longest commit_interval; a longer queue (a store that
// failed for a while) is cut into blocks of at most this.
inline constexpr std::int64_t kMaxBlockSpanMs = 300'000;

namespace sample_codec {
// Sorts `values`. `exact`: every value reads back bit for bit (float64 where float32 would round).
void encode(std::string& out, std::vector<std::pair<std::uint32_t, double>>& values,
            bool exact = false);

// A stored row's envelope: kDeflated, varint(size of the data), the data deflated (raw). pack()
// always wraps; pack_if_smaller() only when that is smaller (a rollup blob of two series is not).
// unpack() gives the data of a wrapped row (in `buf`) or the row itself when it is not wrapped;
// nullopt for a damaged envelope. The marker cannot start a plain blob: format 2 starts with
// kFormat2 and format 1 with a byte of 4 or more.
inline constexpr char kDeflated = 0x02;
std::string pack(std::string_view data);
std::string pack_if_smaller(std::string data);
std::optional<std::string_view> unpack(std::string_view stored, std::string& buf);

// A block: a commit's ticks in time order, then pack_if_smaller(). Two layouts; unpack_block()
// reads both, pack_block() writes the second whenever every blob is format 2 (encode()'s) or
// decoded values (a block's ticks read back):
//  - ticks (until format 3): each varint(ts - the previous tick's ts; 0 for the first, which is at
//    the block's ts), varint(blob size), blob. Its first byte is 0.
//  - format 3, by series: 0x03, varint(ticks), the ticks' ts deltas as above, varint(series),
//    their ids (varint deltas), then per series its column: runs varint(length << 3 | tag) over
//    the ticks (format 2's tags; 6, a float32 whose served form is a decimal of up to 9 places;
//    7, no value in that tick); if it has cells of tags 0, 4, 5 or 6, varint(scale << 1 |
//    order) and each such value times 10^scale as zigzag varints of its first (order 0) or
//    second (order 1) differences, whichever is shorter (a counter rising evenly is a run of
//    zeros), or, for scale 15 (no common scale fits in 64 bits), the format-2 payloads as they
//    are; then its float32 and double cells raw. Deflated, 60 ticks of the default agent take
//    43 % fewer bytes than the first layout (docs/benchmarks.md). pack_block() keeps it only when
//    it reads back to the very values it was made from.
// unpack_block() gives the (ts, blob) pairs (views into `stored` or `buf`): the stored blobs of
// the first layout, blobs of decoded values (kDecodedValues, sample_codec_impl.hpp) of format 3,
// each value bit for bit what format 2 decodes to, read without a second decoding. False for a
// damaged block, or one whose ticks do not rise in time.
using Tick = std::pair<std::int64_t, std::string>;
std::string pack_block(std::int64_t block_ts, const Tick* first, const Tick* end);
bool unpack_block(std::string_view stored, std::int64_t block_ts, std::string& buf,
                  std::vector<std::pair<std::int64_t, std::string_view>>& ticks);
// Calls fn(series_id, value) for each entry; throws StoreError on a malformed blob.
template <class Fn>
void decode(std::string_view blob, Fn&& fn);
}  // namespace sample_codec

}  // namespace kiwi::agent

#include "store/sample_codec_impl.hpp"
