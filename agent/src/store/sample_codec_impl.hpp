// Encoding of one tick's values (see sample_codec.hpp). Two formats; decode() reads both, encode()
// writes format 2. Entries are sorted by series id.
//
// Format 1 (schema version 1): each entry is varint((id - previous_id) << 2 | tag), then the value:
//   tag 0: zigzag varint of an integral value (byte counts, hertz: exact, 1-5 bytes typically)
//   tag 1: float32 little-endian (other values: 7 significant digits, plenty for telemetry)
//   tag 2: float64 little-endian (integral values beyond 2^53)
// Its first byte is never 0x00-0x03: ids start at 1, so the first head is at least 4.
//
// Format 2 (schema version 2): the byte kFormat2, then varint((id - previous_id) << 3 | tag):
//   tags 0-2 as in format 1
//   tag 3: the value 0, no payload (idle rates, error counters and swap are mostly 0)
//   tag 4: a decimal, varint(zigzag(m) << 2 | (k - 1)): the value is m / 10^k, k = 1..4.
//          Written for a value that is exactly that quotient, whatever its size (a counter in
//          seconds: 1234567.89 from ticks / 100), and for a float32 value whose served form
//          (below) is exactly that quotient and short (load 0.99, 45.1 celsius), so a reader
//          gets the very double format 1 gives.
//   tag 5: zigzag varint of an integral value / 1024 (meminfo and statvfs sizes are whole KiB)
// Decoded values (never stored): the byte kDecodedValues, then per entry the id (uint32) and the
// value (double), little-endian, 12 bytes. unpack_block() gives a format-3 block's ticks so, each
// value already what format 2 decodes it to: a query reads them without decoding them again.
// Decoded values are what format 1 gives for the same input (rows shrink, a quarter on the
// default sensors), except that decimals of up to 4 places are exact instead of float32.
#pragma once

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace kiwi::agent::sample_codec {

inline constexpr char kDecodedValues = 0x00;  // format 1 never starts so: its first head is >= 4
inline constexpr char kFormat2 = 0x01;
inline constexpr double kPow10[] = {1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9};

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

inline std::uint64_t zigzag(std::int64_t i) {
  return (static_cast<std::uint64_t>(i) << 1) ^ static_cast<std::uint64_t>(i >> 63);
}

inline std::int64_t unzigzag(std::uint64_t z) {
  return static_cast<std::int64_t>((z >> 1) ^ (~(z & 1) + 1));
}

// What a stored float32 reads back as: the shortest decimal that names it (2.12f -> 2.12, not
// 2.1199998855591), the value as it was written, and short in JSON.
inline double served_float(float f) {
  char text[32];
  auto written = std::to_chars(text, text + sizeof text, f);
  double value = 0;
  std::from_chars(text, written.ptr, value);
  return value;
}

[[noreturn]] inline void malformed() {
  throw StoreError("malformed sample blob");
}

// The value of an entry whose payload is a varint: tags 0, 4 and 5 of format 2, and 6, a decimal
// of up to 9 places varint(zigzag(m) << 4 | k) = m / 10^k (format 3's columns only: a float32
// whose served form is that decimal, the very double served_float() gives). False for another.
inline bool varint_value(std::uint64_t tag, std::uint64_t z, double& value) {
  switch (tag) {
    case 0:
      value = static_cast<double>(unzigzag(z));
      return true;
    case 4:
      // m and 10^k are exact doubles and IEEE division rounds correctly: the nearest double to
      // the decimal, the same one from_chars gives for its text.
      value = static_cast<double>(unzigzag(z >> 2)) / kPow10[(z & 3) + 1];
      return true;
    case 5:
      value = static_cast<double>(unzigzag(z)) * 1024;
      return true;
    case 6:
      value = static_cast<double>(unzigzag(z >> 4)) / kPow10[z & 15];
      return (z & 15) <= 9;
    default:
      return false;
  }
}

template <class Fn>
void decode(std::string_view blob, Fn&& fn) {
  if (!blob.empty() && blob.front() == kDecodedValues) {
    if ((blob.size() - 1) % 12 != 0) malformed();
    for (const char* p = blob.data() + 1; p != blob.data() + blob.size(); p += 12) {
      std::uint32_t id;
      double value;
      std::memcpy(&id, p, 4);
      std::memcpy(&value, p + 4, 8);
      fn(id, value);
    }
    return;
  }
  const bool format2 = !blob.empty() && blob.front() == kFormat2;
  if (format2) blob.remove_prefix(1);
  const int tag_bits = format2 ? 3 : 2;
  const std::uint64_t tag_mask = (1u << tag_bits) - 1;
  std::uint64_t id = 0;
  while (!blob.empty()) {
    std::uint64_t head, z;
    if (!get_varint(blob, head)) malformed();
    id += head >> tag_bits;
    double value;
    switch (head & tag_mask) {
      case 0:
      case 4:
      case 5:
        if (!get_varint(blob, z)) malformed();
        varint_value(head & tag_mask, z, value);
        break;
      case 1: {
        if (blob.size() < 4) malformed();
        float f;
        std::memcpy(&f, blob.data(), 4);
        blob.remove_prefix(4);
        value = served_float(f);
        break;
      }
      case 2:
        if (blob.size() < 8) malformed();
        std::memcpy(&value, blob.data(), 8);
        blob.remove_prefix(8);
        break;
      case 3:
        value = 0;
        break;
      default:
        malformed();
    }
    fn(static_cast<std::uint32_t>(id), value);
  }
}

}  // namespace kiwi::agent::sample_codec
