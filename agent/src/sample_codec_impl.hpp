// Encoding of one tick's values (see store.hpp). Entries sorted by series id; each is
//   varint((id - previous_id) << 2 | tag), then the value:
//   tag 0: zigzag varint of an integral value (byte counts, hertz: exact, 1-5 bytes typically)
//   tag 1: float32 little-endian (other values: 7 significant digits, plenty for telemetry)
//   tag 2: float64 little-endian (integral values beyond 2^53)
#pragma once

#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>

namespace kiwi::agent::sample_codec {

inline void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

inline bool get_varint(std::string_view& in, std::uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (in.empty()) return false;
    auto b = static_cast<unsigned char>(in.front());
    in.remove_prefix(1);
    v |= std::uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

template <class Fn>
void decode(std::string_view blob, Fn&& fn) {
  std::uint64_t id = 0;
  while (!blob.empty()) {
    std::uint64_t head;
    if (!get_varint(blob, head)) throw StoreError("malformed sample blob");
    id += head >> 2;
    double value;
    switch (head & 3) {
      case 0: {
        std::uint64_t z;
        if (!get_varint(blob, z)) throw StoreError("malformed sample blob");
        value = static_cast<double>(static_cast<std::int64_t>((z >> 1) ^ (~(z & 1) + 1)));
        break;
      }
      case 1: {
        if (blob.size() < 4) throw StoreError("malformed sample blob");
        float f;
        std::memcpy(&f, blob.data(), 4);
        blob.remove_prefix(4);
        // The shortest decimal that names this float (2.12f -> 2.12, not 2.1199998855591): the
        // value as it was written, and short in JSON.
        char text[32];
        auto written = std::to_chars(text, text + sizeof text, f);
        std::from_chars(text, written.ptr, value);
        break;
      }
      case 2: {
        if (blob.size() < 8) throw StoreError("malformed sample blob");
        std::memcpy(&value, blob.data(), 8);
        blob.remove_prefix(8);
        break;
      }
      default: throw StoreError("malformed sample blob");
    }
    fn(static_cast<std::uint32_t>(id), value);
  }
}

}  // namespace kiwi::agent::sample_codec
