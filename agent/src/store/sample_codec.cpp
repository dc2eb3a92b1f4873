#include "store/sample_codec.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <iterator>

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

namespace {
// Block format 3 (see sample_codec.hpp): the ticks' format-2 blobs laid out by series.
constexpr char kBlockColumns = 0x03;
constexpr std::uint8_t kDecimal = 6;  // a float32 that is a short decimal (varint_value())
constexpr std::uint8_t kAbsent = 7;   // the series has no value in this tick
constexpr int kMaxScale = 9;
constexpr int kPayloadColumn = 15;
constexpr std::int64_t kPow10Int[] = {1,      10,      100,      1000,      10000,
                                      100000, 1000000, 10000000, 100000000, 1000000000};
constexpr std::int64_t kExactDoubleLimit = std::int64_t(1) << 53;
// Series x ticks a block in this format may hold (196 x 60 on the default sensors), so a damaged
// one cannot make the reader write more than ~16 MiB; a bigger block is written in the old layout.
constexpr std::uint64_t kMaxBlockCells = 1u << 20;

struct Cell {
  std::uint8_t tag = kAbsent;
  std::int8_t places = 0;     // kDecimal: the value is decimal / 10^places
  std::uint64_t payload = 0;  // tags 0, 4, 5: the varint; 1: the float32's bits; 2: the double's
  std::int64_t decimal = 0;
};

// One format-2 blob's entries, appended to `cells` as (id, cell); false for anything else
// (format 1, ids not rising, an unknown tag): such a block is written in the old layout.
bool parse_format2(std::string_view blob, std::vector<std::pair<std::uint32_t, Cell>>& cells) {
  if (blob.empty() || blob.front() != kFormat2) return false;
  blob.remove_prefix(1);
  std::uint64_t id = 0;
  for (bool first = true; !blob.empty(); first = false) {
    std::uint64_t head;
    if (!get_varint(blob, head) || (!first && head >> 3 == 0)) return false;
    id += head >> 3;
    if (id > UINT32_MAX) return false;
    Cell c;
    c.tag = static_cast<std::uint8_t>(head & 7);
    switch (c.tag) {
      case 0:
      case 4:
      case 5:
        if (!get_varint(blob, c.payload)) return false;
        break;
      case 1:
      case 2: {
        const std::size_t n = c.tag == 1 ? 4 : 8;
        if (blob.size() < n) return false;
        std::memcpy(&c.payload, blob.data(), n);
        blob.remove_prefix(n);
        break;
      }
      case 3:
        break;
      default:
        return false;
    }
    cells.emplace_back(static_cast<std::uint32_t>(id), c);
  }
  return true;
}

bool numeric(std::uint8_t tag) {
  return tag == 0 || tag == 4 || tag == 5 || tag == kDecimal;
}

// The decimal places a cell's value needs (its k), or -1 for a float32 that is no decimal of
// up to kMaxScale places: the fewest k whose m / 10^k converts back to the very float, if
// m / 10^k is also what the float is served as (the shortest decimal naming it).
int float_places(std::uint32_t bits, std::int64_t& m) {
  float f;
  std::memcpy(&f, &bits, 4);
  if (!std::isfinite(f) || f == 0) return -1;  // 0 and -0 are tag 3 in encode()'s blobs
  for (int k = 0; k <= kMaxScale; ++k) {
    const double scaled = static_cast<double>(f) * kPow10[k];
    if (!(std::fabs(scaled) < 4.5e15)) return -1;
    m = std::llround(scaled);
    const double decimal = static_cast<double>(m) / kPow10[k];
    if (static_cast<float>(decimal) != f) continue;
    // Read back as a decimal, it must be the very double served_float() gives.
    const double served = served_float(f);
    return std::memcmp(&decimal, &served, sizeof decimal) == 0 ? k : -1;
  }
  return -1;
}

// The cell's value times 10^scale (its mantissa at the column's scale); false on overflow.
bool scaled_value(const Cell& c, int scale, std::int64_t& out) {
  std::int64_t m = 0;
  int k = 0;
  switch (c.tag) {
    case 0:
      m = unzigzag(c.payload);
      break;
    case 5:
      if (__builtin_mul_overflow(unzigzag(c.payload), std::int64_t(1024), &m)) return false;
      break;
    case 4:
      m = unzigzag(c.payload >> 2);
      k = static_cast<int>(c.payload & 3) + 1;
      break;
    default:  // kDecimal
      m = c.decimal;
      k = c.places;
      break;
  }
  if (k < 0 || k > scale) return false;
  return !__builtin_mul_overflow(m, kPow10Int[scale - k], &out);
}

std::size_t deltas_size(const std::vector<std::int64_t>& v, int order) {
  std::size_t n = 0;
  std::uint64_t prev = 0, prev_delta = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::uint64_t x = static_cast<std::uint64_t>(v[i]);
    const std::uint64_t d = x - prev;
    n += varint_size(zigzag(static_cast<std::int64_t>(order == 2 && i > 1 ? d - prev_delta : d)));
    prev = x;
    prev_delta = d;
  }
  return n;
}

void put_deltas(std::string& out, const std::vector<std::int64_t>& v, int order) {
  std::uint64_t prev = 0, prev_delta = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::uint64_t x = static_cast<std::uint64_t>(v[i]);
    const std::uint64_t d = x - prev;
    put_varint(out, zigzag(static_cast<std::int64_t>(order == 2 && i > 1 ? d - prev_delta : d)));
    prev = x;
    prev_delta = d;
  }
}

// One series' cells across the block: its tag runs, then (if it has numeric cells) varint(scale
// << 1 | second order) and the mantissas' deltas, then its float32 and double cells raw. When
// its values do not fit in 64 bits at a common scale (an integer near 2^53 beside a decimal of
// 4 places), the scale is kPayloadColumn and the numeric cells' format-2 payloads follow as they
// are.
void put_column(std::string& out, std::vector<Cell>& cells) {
  // Float32 cells that are short decimals join the integers and decimals, unless the column's
  // scale then overflows (a huge counter beside a value of 9 places: not seen in practice).
  int scale = 0;
  for (auto& c : cells) {
    if (c.tag == 1) {
      const int k = float_places(static_cast<std::uint32_t>(c.payload), c.decimal);
      if (k >= 0) {
        c.tag = kDecimal;
        c.places = static_cast<std::int8_t>(k);
        scale = std::max(scale, k);
      }
    }
    if (c.tag == 4) scale = std::max(scale, static_cast<int>(c.payload & 3) + 1);
  }
  std::vector<std::int64_t> mantissas;
  for (int attempt = 0;; ++attempt) {
    mantissas.clear();
    bool fits = true;
    for (auto& c : cells) {
      std::int64_t m = 0;
      if (!numeric(c.tag)) continue;
      // A float's mantissa must be an exact double for the reader to divide it.
      fits = fits && scaled_value(c, scale, m) &&
             (c.tag != kDecimal || (m > -kExactDoubleLimit && m < kExactDoubleLimit));
      mantissas.push_back(m);
    }
    if (fits) break;
    if (attempt == 1) {  // no common scale: the cells' format-2 payloads as they are
      scale = kPayloadColumn;
      mantissas.clear();
      for (auto& c : cells)
        if (numeric(c.tag)) mantissas.push_back(static_cast<std::int64_t>(c.payload));
      break;
    }
    scale = 0;
    for (auto& c : cells) {
      if (c.tag == kDecimal) c.tag = 1;
      if (c.tag == 4) scale = std::max(scale, static_cast<int>(c.payload & 3) + 1);
    }
  }
  for (std::size_t i = 0; i < cells.size();) {
    std::size_t j = i + 1;
    while (j < cells.size() && cells[j].tag == cells[i].tag) ++j;
    put_varint(out, std::uint64_t(j - i) << 3 | cells[i].tag);
    i = j;
  }
  if (scale == kPayloadColumn) {
    put_varint(out, static_cast<std::uint64_t>(scale) << 1);
    for (auto m : mantissas) put_varint(out, static_cast<std::uint64_t>(m));
  } else if (!mantissas.empty()) {
    const int order = deltas_size(mantissas, 2) < deltas_size(mantissas, 1) ? 2 : 1;
    put_varint(out, static_cast<std::uint64_t>(scale) << 1 | (order == 2 ? 1 : 0));
    put_deltas(out, mantissas, order);
  }
  for (auto& c : cells)
    if (c.tag == 1 || c.tag == 2) out.append(reinterpret_cast<const char*>(&c.payload), c.tag * 4);
}

// The columns of a block, or "" when its blobs are not all format 2.
std::string columns(std::int64_t block_ts, const Tick* first, const Tick* end) {
  const std::size_t n = static_cast<std::size_t>(end - first);
  std::vector<std::pair<std::uint32_t, Cell>> entries;
  std::vector<std::size_t> tick_end;
  std::vector<std::pair<std::uint32_t, double>> values;
  std::string again;
  for (const Tick* t = first; t != end; ++t) {
    std::string_view blob = t->second;
    if (!blob.empty() && blob.front() == kDecodedValues) {  // ticks read out of a block
      values.clear();
      try {
        decode(blob, [&](std::uint32_t id, double v) { values.emplace_back(id, v); });
      } catch (const StoreError&) {
        return {};
      }
      again.clear();
      encode(again, values);
      blob = again;
    }
    if (!parse_format2(blob, entries)) return {};
    tick_end.push_back(entries.size());
  }
  // The union of the ticks' ids, merged tick by tick (each blob's ids rise; the ticks of a block
  // mostly share them), and each entry to its series' row by walking both in order.
  std::vector<std::uint32_t> ids, merged, tick_ids;
  for (std::size_t t = 0, e = 0; t < n; ++t) {
    tick_ids.clear();
    for (; e < tick_end[t]; ++e) tick_ids.push_back(entries[e].first);
    merged.clear();
    std::set_union(ids.begin(), ids.end(), tick_ids.begin(), tick_ids.end(),
                   std::back_inserter(merged));
    ids.swap(merged);
  }
  if (ids.size() * n > kMaxBlockCells) return {};
  std::vector<Cell> grid(ids.size() * n);  // series-major
  for (std::size_t t = 0, e = 0; t < n; ++t)
    for (std::size_t s = 0; e < tick_end[t]; ++e) {
      while (ids[s] < entries[e].first) ++s;
      grid[s * n + t] = entries[e].second;
    }
  std::string out(1, kBlockColumns);
  put_varint(out, n);
  std::int64_t prev_ts = block_ts;
  for (const Tick* t = first; t != end; ++t) {
    put_varint(out, static_cast<std::uint64_t>(t->first - prev_ts));
    prev_ts = t->first;
  }
  put_varint(out, ids.size());
  std::uint32_t prev_id = 0;
  for (auto id : ids) {
    put_varint(out, id - prev_id);
    prev_id = id;
  }
  std::vector<Cell> column;
  for (std::size_t s = 0; s < ids.size(); ++s) {
    column.assign(grid.begin() + static_cast<std::ptrdiff_t>(s * n),
                  grid.begin() + static_cast<std::ptrdiff_t>((s + 1) * n));
    put_column(out, column);
  }
  return out;
}

struct Run {
  std::uint8_t tag;
  std::uint32_t length;
};

struct ColumnCursor {
  std::uint32_t id = 0;
  int scale = 0;
  std::size_t run = 0;         // index into the runs
  std::uint32_t run_left = 0;  // cells left in it
  std::uint8_t tag = 0;        // its tag
  std::size_t payload = 0;     // index of the next numeric cell's payload
  const char* raw = nullptr;   // the next float32 or double cell
};

// mag / 10 if that is exact: by a multiplication (a division by a variable was a third of a
// history query's time).
inline bool divide_by_10(std::uint64_t& mag) {
  const std::uint64_t q = static_cast<std::uint64_t>(
      (static_cast<unsigned __int128>(mag) * 0xCCCCCCCCCCCCCCCDull) >> 67);
  if (q * 10 != mag) return false;
  mag = q;
  return true;
}

// The payload of a numeric cell of `tag` from its mantissa at `scale`, as varint_value() reads it;
// false if it is not one the encoder could have written.
bool cell_payload(std::uint8_t tag, std::uint64_t m, int scale, std::uint64_t& payload) {
  if (scale == kPayloadColumn) {
    payload = m;
    return tag != kDecimal;
  }
  if (tag == kDecimal) {  // m / 10^scale: the same double as the decimal at its own places
    const auto i = static_cast<std::int64_t>(m);
    if (i <= -kExactDoubleLimit || i >= kExactDoubleLimit) return false;
    payload = zigzag(i) << 4 | static_cast<std::uint64_t>(scale);
    return true;
  }
  const bool negative = static_cast<std::int64_t>(m) < 0;
  std::uint64_t mag = negative ? 0 - m : m;
  int k = scale;
  if (tag == 4) {
    for (; k > 1 && divide_by_10(mag); --k) {
    }
    if (k < 1 || k > 4) return false;
  } else {
    for (; k > 0; --k)
      if (!divide_by_10(mag)) return false;
    if (tag == 5) {
      if (mag % 1024 != 0) return false;
      mag /= 1024;
    }
  }
  payload = zigzag(negative ? static_cast<std::int64_t>(0 - mag) : static_cast<std::int64_t>(mag));
  if (tag == 4) payload = payload << 2 | static_cast<std::uint64_t>(k - 1);
  return true;
}

// Reads block format 3 (after its marker) into blobs of decoded values in `out`, one per tick;
// false for a damaged block. By series first (runs, then each numeric cell's value), then the
// blobs tick by tick.
bool read_columns(std::string_view in, std::int64_t block_ts, std::string& out,
                  std::vector<std::pair<std::int64_t, std::string_view>>& ticks) {
  // This thread's buffers, kept from block to block: a query reads hundreds.
  thread_local std::vector<std::int64_t> ts;
  thread_local std::vector<std::uint64_t> payloads;
  thread_local std::vector<std::size_t> ends;
  thread_local std::vector<ColumnCursor> cols;
  thread_local std::vector<Run> runs;
  std::uint64_t n = 0, series = 0;
  if (!get_varint(in, n) || n == 0 || n > in.size()) return false;
  ts.resize(static_cast<std::size_t>(n));
  ends.resize(static_cast<std::size_t>(n));
  std::int64_t at = block_ts;
  for (std::size_t t = 0; t < n; ++t) {
    std::uint64_t delta;
    if (!get_varint(in, delta) || delta > static_cast<std::uint64_t>(kMaxBlockSpanMs) ||
        (t == 0) != (delta == 0))
      return false;
    ts[t] = at += static_cast<std::int64_t>(delta);
  }
  if (!get_varint(in, series) || series > in.size() || series * n > kMaxBlockCells) return false;
  cols.assign(static_cast<std::size_t>(series), ColumnCursor{});
  std::uint64_t id = 0;
  for (std::size_t s = 0; s < series; ++s) {
    std::uint64_t step;
    if (!get_varint(in, step) || (s > 0 && step == 0) || step > UINT32_MAX ||
        (id += step) > UINT32_MAX)
      return false;
    cols[s].id = static_cast<std::uint32_t>(id);
  }
  runs.clear();
  payloads.clear();
  for (auto& col : cols) {
    col.run = runs.size();
    std::size_t numerics = 0, raw_bytes = 0;
    for (std::uint64_t covered = 0; covered < n;) {
      std::uint64_t r;
      if (!get_varint(in, r) || r >> 3 == 0 || r >> 3 > n - covered) return false;
      const auto tag = static_cast<std::uint8_t>(r & 7);
      runs.push_back({tag, static_cast<std::uint32_t>(r >> 3)});
      covered += r >> 3;
      if (numeric(tag)) numerics += r >> 3;
      if (tag == 1 || tag == 2) raw_bytes += (r >> 3) * tag * 4;
    }
    col.run_left = runs[col.run].length;
    col.tag = runs[col.run].tag;
    col.payload = payloads.size();
    if (numerics > 0) {
      std::uint64_t head;
      if (!get_varint(in, head) || numerics > in.size()) return false;
      col.scale = static_cast<int>(std::min<std::uint64_t>(head >> 1, kPayloadColumn));
      if (col.scale > kMaxScale && head != kPayloadColumn << 1) return false;
      const bool second = head & 1, as_is = col.scale == kPayloadColumn;
      std::uint64_t prev = 0, prev_delta = 0;
      for (std::size_t i = 0; i < numerics; ++i) {
        std::uint64_t z;
        if (!get_varint(in, z)) return false;
        const std::uint64_t d =
            static_cast<std::uint64_t>(unzigzag(z)) + (second && i > 1 ? prev_delta : 0);
        prev += d;
        prev_delta = d;
        payloads.push_back(as_is ? z : prev);
      }
      // The mantissas to values (their bits), run by run (one tag each).
      std::uint64_t* cell = payloads.data() + col.payload;
      for (std::size_t r = col.run; r < runs.size(); ++r) {
        const std::uint8_t tag = runs[r].tag;
        if (!numeric(tag)) continue;
        for (std::uint32_t i = 0; i < runs[r].length; ++i, ++cell) {
          // An exact double divided by 10^scale: the same rational, so the same double, as the
          // cell's own m / 10^k (or integer) that format 2 decodes; else through its payload.
          const auto m = static_cast<std::int64_t>(*cell);
          double value;
          if (col.scale != kPayloadColumn && m > -kExactDoubleLimit && m < kExactDoubleLimit)
            value = col.scale == 0 ? static_cast<double>(m)
                                   : static_cast<double>(m) / kPow10[col.scale];
          else if (!cell_payload(tag, *cell, col.scale, *cell) || !varint_value(tag, *cell, value))
            return false;
          *cell = std::bit_cast<std::uint64_t>(value);
        }
      }
    }
    if (raw_bytes > in.size()) return false;
    col.raw = in.data();
    in.remove_prefix(raw_bytes);
  }
  if (!in.empty()) return false;
  // The ticks as decoded values (kDecodedValues): 12 bytes a value.
  std::size_t present = 0;
  for (auto& r : runs) present += r.tag == kAbsent ? 0 : r.length;
  out.resize(static_cast<std::size_t>(n) + present * 12);
  char* p = out.data();
  for (std::size_t t = 0; t < n; ++t) {
    *p++ = kDecodedValues;
    for (auto& col : cols) {
      if (col.run_left == 0) {
        ++col.run;
        col.run_left = runs[col.run].length;
        col.tag = runs[col.run].tag;
      }
      --col.run_left;
      const std::uint8_t tag = col.tag;
      if (tag == kAbsent) continue;
      std::uint64_t bits = 0;  // 3: the value 0
      if (numeric(tag)) {
        bits = payloads[col.payload++];
      } else if (tag == 1) {
        float f;
        std::memcpy(&f, col.raw, 4);
        col.raw += 4;
        bits = std::bit_cast<std::uint64_t>(served_float(f));
      } else if (tag == 2) {
        std::memcpy(&bits, col.raw, 8);
        col.raw += 8;
      }
      std::memcpy(p, &col.id, 4);
      std::memcpy(p + 4, &bits, 8);
      p += 12;
    }
    ends[t] = static_cast<std::size_t>(p - out.data());
  }
  ticks.clear();
  for (std::size_t t = 0, begin = 0; t < n; begin = ends[t++])
    ticks.emplace_back(ts[t], std::string_view(out).substr(begin, ends[t] - begin));
  return true;
}

// Whether two blobs decode to the same ids and values, bit for bit.
bool same_values(std::string_view a, std::string_view b) {
  thread_local std::vector<std::pair<std::uint32_t, std::uint64_t>> values;
  values.clear();
  try {
    decode(a, [](std::uint32_t id, double v) {
      values.emplace_back(id, std::bit_cast<std::uint64_t>(v));
    });
    std::size_t i = 0;
    bool same = true;
    decode(b, [&](std::uint32_t id, double v) {
      same =
          same && i < values.size() && values[i] == std::pair(id, std::bit_cast<std::uint64_t>(v));
      ++i;
    });
    return same && i == values.size();
  } catch (const StoreError&) {
    return false;
  }
}
}  // namespace

std::string pack_block(std::int64_t block_ts, const Tick* first, const Tick* end) {
  std::string cols = columns(block_ts, first, end);
  if (!cols.empty()) {
    // Kept only when it reads back to the very values (it does for every blob encode() writes).
    std::string back;
    std::vector<std::pair<std::int64_t, std::string_view>> ticks;
    bool same = read_columns(std::string_view(cols).substr(1), block_ts, back, ticks) &&
                ticks.size() == static_cast<std::size_t>(end - first);
    for (std::size_t i = 0; same && i < ticks.size(); ++i)
      same = ticks[i].first == first[i].first && same_values(ticks[i].second, first[i].second);
    if (same) return pack_if_smaller(std::move(cols));
  }
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
  if (in.front() == kBlockColumns) {
    // The columns are read from a buffer of this thread's, the blobs written into `buf`.
    thread_local std::string columns_buf;
    if (in.data() == buf.data()) {
      std::swap(buf, columns_buf);
      in = columns_buf;
    }
    if (read_columns(in.substr(1), block_ts, buf, ticks)) return true;
    ticks.clear();
    return false;
  }
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
