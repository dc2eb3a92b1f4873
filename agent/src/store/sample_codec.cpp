#include "store/sample_codec.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

#include "base/compress.hpp"

namespace kiwi::agent {

static_assert(std::endian::native == std::endian::little, "sample_codec assumes little-endian");

namespace sample_codec {
namespace {
std::size_t varint_size(std::uint64_t v) {
  std::size_t n = 1;
  for (; v >= 0x80; v >>= 7) ++n;
  return n;
}

// Tag 4 (see sample_codec_impl.hpp): the fewest decimals k that name `served` exactly, if that
// takes fewer bytes than a float32; the division check is the same one decode() does, so what
// is read back is bit for bit what the float32 would give.
bool put_short_decimal(std::string& out, std::uint64_t head, double served) {
  for (int k = 1; k <= 4; ++k) {
    const double scaled = served * kPow10[k];
    if (!(std::fabs(scaled) < 1 << 20)) return false;  // too many digits to win; NaN too
    const auto m = static_cast<std::int64_t>(std::llround(scaled));
    if (m == 0 || static_cast<double>(m) / kPow10[k] != served) continue;
    const std::uint64_t payload = zigzag(m) << 2 | static_cast<std::uint64_t>(k - 1);
    if (varint_size(payload) >= 4) return false;
    put_varint(out, head | 4);
    put_varint(out, payload);
    return true;
  }
  return false;
}

// Tag 4 for a value that is exactly a decimal of at most 4 places (a counter in seconds read as
// ticks / 100 or milliseconds / 1000: 1234567.89), however many digits: a float32 would round
// it, and a counter's rate is the difference of two such values.
bool put_exact_decimal(std::string& out, std::uint64_t head, double v) {
  for (int k = 1; k <= 4; ++k) {
    const double scaled = v * kPow10[k];
    if (!(std::fabs(scaled) < 9007199254740992.0)) return false;  // beyond 2^53; NaN too
    const auto m = static_cast<std::int64_t>(std::llround(scaled));
    if (static_cast<double>(m) / kPow10[k] != v) continue;
    put_varint(out, head | 4);
    put_varint(out, zigzag(m) << 2 | static_cast<std::uint64_t>(k - 1));
    return true;
  }
  return false;
}
}  // namespace

void encode(std::string& out, std::vector<std::pair<std::uint32_t, double>>& values, bool exact) {
  std::sort(values.begin(), values.end());
  out.push_back(kFormat2);
  std::uint32_t prev = 0;
  for (auto& [id, v] : values) {
    const std::uint64_t head = std::uint64_t(id - prev) << 3;
    prev = id;
    if (v == 0) {
      put_varint(out, head | 3);
    } else if (std::nearbyint(v) == v && std::fabs(v) < 9007199254740992.0) {
      const auto i = static_cast<std::int64_t>(v);
      if (i % 1024 == 0 && varint_size(zigzag(i / 1024)) < varint_size(zigzag(i))) {
        put_varint(out, head | 5);
        put_varint(out, zigzag(i / 1024));
      } else {
        put_varint(out, head | 0);
        put_varint(out, zigzag(i));
      }
    } else if (put_exact_decimal(out, head, v)) {
    } else if (std::isfinite(v) && std::fabs(v) < 3.0e38 &&
               (!exact || served_float(static_cast<float>(v)) == v)) {
      const float f = static_cast<float>(v);
      if (!put_short_decimal(out, head, served_float(f))) {
        put_varint(out, head | 1);
        char b[4];
        std::memcpy(b, &f, 4);
        out.append(b, 4);
      }
    } else {
      put_varint(out, head | 2);
      char b[8];
      std::memcpy(b, &v, 8);
      out.append(b, 8);
    }
  }
}
std::string pack(std::string_view data) {
  std::string out(1, kDeflated);
  put_varint(out, data.size());
  out += deflate_raw(data);
  return out;
}

std::string pack_if_smaller(std::string data) {
  std::string packed = pack(data);
  return packed.size() < data.size() ? packed : data;
}

// Envelopes claiming more than this are damaged: a block holds at most kMaxBlockSpanMs of ticks,
// kMaxPendingRows at the most, of a few values each, and a rollup one minute.
constexpr std::uint64_t kMaxUnpackedBytes = 256u << 20;

std::optional<std::string_view> unpack(std::string_view stored, std::string& buf) {
  if (stored.empty() || stored.front() != kDeflated) return stored;
  stored.remove_prefix(1);
  std::uint64_t size = 0;
  if (!get_varint(stored, size) || size > kMaxUnpackedBytes ||
      !inflate_raw(stored, static_cast<std::size_t>(size), buf))
    return std::nullopt;
  return std::string_view(buf);
}

std::string pack_block(std::int64_t block_ts, const Tick* first, const Tick* end) {
  std::string raw;
  std::int64_t prev = block_ts;
  for (const Tick* t = first; t != end; ++t) {
    put_varint(raw, static_cast<std::uint64_t>(t->first - prev));  // ticks rise: >= 0
    put_varint(raw, t->second.size());
    raw += t->second;
    prev = t->first;
  }
  return pack_if_smaller(std::move(raw));
}

bool unpack_block(std::string_view stored, std::int64_t block_ts, std::string& buf,
                  std::vector<std::pair<std::int64_t, std::string_view>>& ticks) {
  ticks.clear();
  auto raw = unpack(stored, buf);
  if (!raw || raw->empty()) return false;
  std::string_view in = *raw;
  std::int64_t ts = block_ts;
  while (!in.empty()) {
    std::uint64_t delta = 0, size = 0;
    if (!get_varint(in, delta) || !get_varint(in, size) || size > in.size() ||
        delta > static_cast<std::uint64_t>(kMaxBlockSpanMs) || (ticks.empty() != (delta == 0))) {
      ticks.clear();
      return false;
    }
    ts += static_cast<std::int64_t>(delta);
    ticks.emplace_back(ts, in.substr(0, static_cast<std::size_t>(size)));
    in.remove_prefix(static_cast<std::size_t>(size));
  }
  return true;
}

}  // namespace sample_codec

}  // namespace kiwi::agent
