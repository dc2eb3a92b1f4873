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

// A block: ticks in time order, each varint(ts - the previous tick's ts; 0 for the first, which
// is at the block's ts), varint(blob size), blob; then pack_if_smaller(). unpack_block() gives
// the (ts, blob) pairs (views into `stored` or `buf`); false for a damaged block, or one whose
// ticks do not rise in time.
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
