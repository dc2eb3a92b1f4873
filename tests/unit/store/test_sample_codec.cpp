// The per-tick sample encoding (sample_codec): format 2 must read back exactly what format 1 did,
// rows written in format 1 must keep decoding, and format 2 must be smaller.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>

#include "store/sample_codec.hpp"

using namespace kiwi::agent;
using Values = std::vector<std::pair<std::uint32_t, double>>;

namespace {

// Format 1 as the agent wrote it until schema version 2 (a copy of the old encoder), to produce
// old rows and to compare sizes.
std::string encode_format1(Values values) {
  std::sort(values.begin(), values.end());
  std::string out;
  std::uint32_t prev = 0;
  for (auto& [id, v] : values) {
    std::uint64_t head = std::uint64_t(id - prev) << 2;
    prev = id;
    if (std::nearbyint(v) == v && std::fabs(v) < 9007199254740992.0) {
      sample_codec::put_varint(out, head | 0);
      sample_codec::put_varint(out, sample_codec::zigzag(static_cast<std::int64_t>(v)));
    } else if (std::isfinite(v) && std::fabs(v) < 3.0e38) {
      sample_codec::put_varint(out, head | 1);
      float f = static_cast<float>(v);
      out.append(reinterpret_cast<const char*>(&f), 4);
    } else {
      sample_codec::put_varint(out, head | 2);
      out.append(reinterpret_cast<const char*>(&v), 8);
    }
  }
  return out;
}

// Whether `v` is exactly a decimal of at most 4 places (m / 10^k, |m| < 2^53), as counters in
// seconds are (ticks / 100, milliseconds / 1000).
bool exact_decimal(double v) {
  for (double p : {10.0, 100.0, 1000.0, 10000.0}) {
    const double m = std::nearbyint(v * p);
    if (std::fabs(m) < 9007199254740992.0 && m / p == v) return true;
  }
  return false;
}

// What the history API answers for a stored value: integers and decimals of up to 4 places
// exactly, other values as the shortest decimal of their float32, huge ones as doubles.
double served(double v) {
  if (std::nearbyint(v) == v && std::fabs(v) < 9007199254740992.0)
    return static_cast<double>(static_cast<std::int64_t>(v));  // -0.0 was stored as 0
  if (exact_decimal(v)) return v;
  if (std::isfinite(v) && std::fabs(v) < 3.0e38)
    return sample_codec::served_float(static_cast<float>(v));
  return v;
}

// What format 1 served: the same, but every non-integral value through float32.
double served_format1(double v) {
  if (std::nearbyint(v) == v && std::fabs(v) < 9007199254740992.0)
    return static_cast<double>(static_cast<std::int64_t>(v));
  if (std::isfinite(v) && std::fabs(v) < 3.0e38)
    return sample_codec::served_float(static_cast<float>(v));
  return v;
}

Values decode(std::string_view blob) {
  Values out;
  sample_codec::decode(blob, [&](std::uint32_t id, double v) { out.emplace_back(id, v); });
  return out;
}

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// Encodes `values` (ids 1..n) in format 2 and checks each decodes bit for bit to what format 1
// gave, except decimals that float32 rounded and format 2 keeps exact; returns the blob.
std::string check_round_trip(const std::vector<double>& values) {
  Values in;
  for (std::size_t i = 0; i < values.size(); ++i)
    in.emplace_back(static_cast<std::uint32_t>(i + 1), values[i]);
  std::string blob;
  Values copy = in;
  sample_codec::encode(blob, copy);
  Values out = decode(blob);
  Values old = decode(encode_format1(in));
  REQUIRE(out.size() == in.size());
  REQUIRE(old.size() == in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    INFO("value " << in[i].second << " decoded as " << out[i].second);
    CHECK(out[i].first == in[i].first);
    CHECK(same_bits(out[i].second, served(in[i].second)));
    if (served(in[i].second) == served_format1(in[i].second))
      CHECK(same_bits(out[i].second, old[i].second));
  }
  return blob;
}

}  // namespace

TEST_CASE("sample codec: format 2 reads back exactly what format 1 served") {
  SECTION("integers, zeros, KiB multiples and huge values") {
    check_round_trip({0, -0.0, 1, -1, 63, 64, -65, 1024, -2048, 4096 * 3 + 1, 25276026880.0,
                      270553174016.0, 9007199254740991.0, -9007199254740991.0, 9007199254740992.0,
                      1e300, -1e300, 3.5e38});
  }
  SECTION("short decimals: load averages, temperatures, round ratios") {
    std::vector<double> v;
    for (int i = -4000; i <= 12500; ++i) v.push_back(i / 100.0);   // loads and celsius, 0.01
    for (int i = -400; i <= 1250; ++i) v.push_back(i / 10.0);      // celsius, 0.1
    for (int i = 0; i <= 125000; i += 7) v.push_back(i / 1000.0);  // millidegree sensors
    for (int d = 1; d <= 64; ++d)
      for (int n = 0; n <= d; ++n) v.push_back(static_cast<double>(n) / d);  // jiffy ratios
    check_round_trip(v);
  }
  SECTION("arbitrary doubles of every magnitude") {
    std::mt19937_64 rng(42);
    std::uniform_real_distribution<double> unit(0, 1);
    std::vector<double> v;
    for (int i = 0; i < 20000; ++i) {
      double x = unit(rng) * std::pow(10.0, static_cast<int>(rng() % 24) - 12);
      v.push_back(rng() % 2 ? x : -x);
    }
    // Near the edges of the short-decimal range and of float32 rounding.
    for (double x : {0.00005, 0.0001, 0.00015, 26.2143, 26.2144, 26.2145, 262.143, 262144.5,
                     1048575.5, 1.00000005, 0.1f + 0.0, 16777217.5, 1e-40, -1e-45})
      v.push_back(x);
    check_round_trip(v);
  }
}

TEST_CASE("sample codec: counters in seconds are kept exactly, not rounded to float32") {
  // cpu_seconds_total after 2 weeks (ticks / 100), diskio io_time (ms / 1000), a byte counter.
  const std::vector<double> counters = {1234567.89, 98765.43,       86400.123,         4321.5,
                                        17.25,      12345678901.25, 281474976710656.0, 0.01};
  check_round_trip(counters);
  Values in;
  for (std::size_t i = 0; i < counters.size(); ++i)
    in.emplace_back(static_cast<std::uint32_t>(i + 1), counters[i]);
  std::string blob;
  Values copy = in;
  sample_codec::encode(blob, copy);
  CHECK(decode(blob) == in);  // bit for bit: a rate over two such values is the true one
  CHECK(static_cast<float>(1234567.89) != 1234567.89);  // what format 1 would have lost
}

TEST_CASE("sample codec: rows written in format 1 (schema version 1) still decode") {
  // Pinned bytes: id 1 = 5 (integer), id 2 = 2.12f (float32), id 4 = 1e300 (float64).
  std::string blob = "\x04\x0a\x05";
  float f = 2.12f;
  blob.append(reinterpret_cast<const char*>(&f), 4);
  blob += "\x0a";
  double d = 1e300;
  blob.append(reinterpret_cast<const char*>(&d), 8);
  CHECK(decode(blob) == Values{{1, 5}, {2, 2.12}, {4, 1e300}});
  // And whatever the old encoder wrote for a typical tick.
  Values tick = {{1, 0.41}, {2, 8300695552.0}, {3, 0}, {40, 0.538095235824585}, {41, -12.5}};
  Values back = decode(encode_format1(tick));
  REQUIRE(back.size() == tick.size());
  for (std::size_t i = 0; i < tick.size(); ++i)
    CHECK(same_bits(back[i].second, served_format1(tick[i].second)));
}

TEST_CASE("sample codec: format 2 makes a typical tick a fifth smaller or better") {
  // The default sensors on a small machine: load, memory in whole KiB, filesystem sizes, CPU
  // ratios of jiffies, idle network and disk rates (zeros), a few temperatures.
  Values tick;
  std::uint32_t id = 1;
  for (double v : {0.41, 0.52, 0.6}) tick.emplace_back(id++, v);
  for (double v : {8300695552.0, 5120000000.0, 3180695552.0, 1843200000.0, 65536000.0, 0.0, 0.0})
    tick.emplace_back(id++, v);
  tick.emplace_back(id++, 3180695552.0 / 8300695552.0);
  for (double v : {62202478592.0, 31101239296.0, 31101239296.0, 3891200.0, 3777412.0, 0.0})
    tick.emplace_back(id++, v);
  for (int core = 0; core < 9; ++core) tick.emplace_back(id++, (37.0 + core) / 210.0);
  for (int i = 0; i < 8; ++i) tick.emplace_back(id++, 0.0);  // iowait, irq, steal, nice ...
  for (int i = 0; i < 24; ++i) tick.emplace_back(id++, i % 8 == 0 ? 1536.0 : 0.0);  // network
  for (double v : {45.1, 44.4, 46.2, 45.9}) tick.emplace_back(id++, v);
  std::string blob;
  Values copy = tick;
  sample_codec::encode(blob, copy);
  const std::size_t old_size = encode_format1(tick).size();
  INFO("format 1: " << old_size << " bytes, format 2: " << blob.size());
  CHECK(blob.size() * 5 <= old_size * 4);
  check_round_trip([&] {
    std::vector<double> v;
    for (auto& [i, x] : tick) v.push_back(x);
    return v;
  }());
}

TEST_CASE("sample codec: malformed blobs are refused, not misread") {
  auto refused = [](std::string_view blob) {
    CHECK_THROWS_AS(sample_codec::decode(blob, [](auto, auto) {}), kiwi::StoreError);
  };
  refused(std::string_view("\x05", 1));                // format 1: float32 cut short
  refused(std::string_view("\x01\x08\x80", 3));        // format 2: integer varint cut short
  refused(std::string_view("\x01\x0e\x01", 3));        // format 2: tag 6 does not exist
  refused(std::string_view("\x01\x0f", 2));            // format 2: tag 7 does not exist
  refused(std::string_view("\x01\x09\x00\x00", 4));    // format 2: float32 cut short
  CHECK(decode(std::string_view("\x01", 1)).empty());  // a tick without values
  CHECK(decode(std::string_view("\x01\x0b\x0b", 3)) == Values{{1, 0}, {2, 0}});
  // Decoded values (a format-3 block's ticks, never stored): id 7 = -0.5, then 11 bytes, refused.
  const std::string decoded("\x00\x07\x00\x00\x00\x00\x00\x00\x00\x00\x00\xe0\xbf", 13);
  CHECK(decode(decoded) == Values{{7, -0.5}});
  refused(decoded.substr(0, 12));
}

TEST_CASE("sample codec: a block gives back its ticks, and a damaged one is refused whole") {
  std::vector<sample_codec::Tick> ticks;
  for (int t = 0; t < 10; ++t) {
    Values v;
    for (std::uint32_t id = 1; id <= 30; ++id) v.emplace_back(id, id % 3 ? 20.5 + t : 1536.0 * t);
    std::string blob;
    sample_codec::encode(blob, v);
    ticks.emplace_back(60'000 + t * 1000, blob);
  }
  const std::string block =
      sample_codec::pack_block(60'000, ticks.data(), ticks.data() + ticks.size());
  std::size_t plain = 0;
  for (auto& [ts, blob] : ticks) plain += blob.size();
  INFO("10 ticks: " << plain << " bytes plain, " << block.size() << " in a block");
  CHECK(block.size() < plain);
  std::string buf;
  std::vector<std::pair<std::int64_t, std::string_view>> back;
  REQUIRE(sample_codec::unpack_block(block, 60'000, buf, back));
  REQUIRE(back.size() == 10);
  for (std::size_t i = 0; i < back.size(); ++i) {
    CHECK(back[i].first == ticks[i].first);
    CHECK(decode(back[i].second) == decode(ticks[i].second));
  }
  // Cut short, a byte flipped in the deflate stream, a size that is not the data's, no envelope:
  // refused (false, nothing given), never a crash or a misread.
  CHECK_FALSE(sample_codec::unpack_block(block.substr(0, block.size() - 3), 60'000, buf, back));
  CHECK(back.empty());
  std::string flipped = block;
  flipped[flipped.size() / 2] ^= 0x55;
  // A flip may still inflate (deflate has no checksum); then the framing must hold.
  if (sample_codec::unpack_block(flipped, 60'000, buf, back))
    for (std::size_t i = 1; i < back.size(); ++i) CHECK(back[i].first > back[i - 1].first);
  std::string resized = block;
  resized[1] = static_cast<char>(resized[1] + 1);  // varint(size) of the data, one more
  CHECK_FALSE(sample_codec::unpack_block(resized, 60'000, buf, back));
  CHECK_FALSE(sample_codec::unpack_block(ticks[0].second, 60'000, buf, back));  // not a block
  CHECK_FALSE(sample_codec::unpack_block("", 60'000, buf, back));
  // A block too small to gain from deflate is stored as it is, and read the same.
  const sample_codec::Tick one{5000, std::string("\x01\x0b\x0b", 3)};
  const std::string tiny = sample_codec::pack_block(5000, &one, &one + 1);
  CHECK(tiny.front() != sample_codec::kDeflated);
  REQUIRE(sample_codec::unpack_block(tiny, 5000, buf, back));
  REQUIRE(back.size() == 1);
  CHECK(back[0].first == 5000);
  CHECK(decode(back[0].second) == Values{{1, 0}, {2, 0}});
}

TEST_CASE("sample codec: rows are deflated only when that is smaller, and read either way") {
  std::string buf;
  const std::string small("\x01\x0b\x0b", 3);
  CHECK(sample_codec::pack_if_smaller(small) == small);  // too short to gain
  CHECK(sample_codec::unpack(small, buf) == std::optional<std::string_view>(small));
  Values v;
  for (std::uint32_t id = 1; id <= 200; ++id) v.emplace_back(id * 5, 45.5);
  std::string big;
  sample_codec::encode(big, v);
  const std::string packed = sample_codec::pack_if_smaller(big);
  CHECK(packed.size() * 4 < big.size());
  CHECK(packed.front() == sample_codec::kDeflated);
  CHECK(sample_codec::unpack(packed, buf) == std::optional<std::string_view>(big));
  CHECK_FALSE(sample_codec::unpack(packed.substr(0, packed.size() / 2), buf));
}

TEST_CASE("store: sample encoding round-trips integers exactly and others to float precision") {
  std::vector<std::pair<std::uint32_t, double>> in = {
      {7, 8300695552.0}, {1, 0.123456789}, {3, -40.5}, {2, 1e300}, {4, 0}, {5, -3}};
  std::string blob;
  sample_codec::encode(blob, in);
  std::vector<std::pair<std::uint32_t, double>> out;
  sample_codec::decode(blob, [&](std::uint32_t id, double v) { out.emplace_back(id, v); });
  REQUIRE(out.size() == 6);
  CHECK(out[0] == std::pair<std::uint32_t, double>{1, 0.12345679});
  CHECK(out[1] == std::pair<std::uint32_t, double>{2, 1e300});
  CHECK(out[2] == std::pair<std::uint32_t, double>{3, -40.5});
  CHECK(out[5] == std::pair<std::uint32_t, double>{7, 8300695552.0});
  CHECK(blob.size() < 40);  // compact: ~100 values a tick must stay small on flash
  CHECK_THROWS_AS(sample_codec::decode(std::string_view("\x05", 1), [](auto, auto) {}),
                  kiwi::StoreError);
}

namespace {

using BlockTicks = std::vector<std::pair<std::int64_t, std::string_view>>;

// The block layout the agent wrote before format 3 (a copy of the old pack_block), as older
// agents left it in the files.
std::string pack_block_ticks_layout(std::int64_t block_ts,
                                    const std::vector<sample_codec::Tick>& ticks) {
  std::string raw;
  std::int64_t prev = block_ts;
  for (auto& [ts, blob] : ticks) {
    sample_codec::put_varint(raw, static_cast<std::uint64_t>(ts - prev));
    sample_codec::put_varint(raw, blob.size());
    raw += blob;
    prev = ts;
  }
  return sample_codec::pack_if_smaller(std::move(raw));
}

// The first byte of a block's data: 0 for the ticks layout, 3 for format 3.
char block_layout(const std::string& block) {
  std::string buf;
  auto data = sample_codec::unpack(block, buf);
  REQUIRE(data);
  REQUIRE(!data->empty());
  return data->front();
}

// Checks that `block` reads back to `ticks`: the same times, and every value bit for bit what
// decoding the tick's own blob gives (today's encode/decode round trip).
void check_block_reads_back(const std::string& block,
                            const std::vector<sample_codec::Tick>& ticks) {
  std::string buf;
  BlockTicks back;
  REQUIRE(sample_codec::unpack_block(block, ticks.front().first, buf, back));
  REQUIRE(back.size() == ticks.size());
  for (std::size_t t = 0; t < ticks.size(); ++t) {
    CHECK(back[t].first == ticks[t].first);
    const Values want = decode(ticks[t].second), got = decode(back[t].second);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      CHECK(got[i].first == want[i].first);
      CHECK(same_bits(got[i].second, want[i].second));
    }
  }
}

// One value of series `id` at tick `t`, of every kind the agent meets: counters rising evenly or
// not, counters in seconds (decimals), KiB sizes, gauges of 7 digits, durations in whole
// microseconds, huge integers, and the edges (NaN, inf, -0.0, denormals, float32's limits).
double value_of_kind(std::uint32_t id, int t, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0, 1);
  const double edges[] = {std::nan(""),
                          -std::nan(""),
                          INFINITY,
                          -INFINITY,
                          -0.0,
                          0.0,
                          5e-324,
                          1e-300,
                          1e300,
                          3.4028234663852886e38,
                          3.5e38,
                          -1.17549435e-38,
                          9007199254740993.0,
                          -9007199254740992.0,
                          18446744073709551616.0,
                          9.2233720368547758e18,
                          0.1,
                          1e-10,
                          123456789.123456789,
                          2.5e-7};
  switch (id % 12) {
    case 0:
      return 1000.0 * t + static_cast<double>(id);  // even counter
    case 1:
      return std::floor(1e6 * t + 1e5 * unit(rng));  // uneven counter
    case 2:
      return (123456700 + 37 * t + static_cast<int>(3 * unit(rng))) / 100.0;  // seconds
    case 3:
      return 1024.0 * std::floor(1e6 + 1e3 * unit(rng));  // KiB
    case 4:
      return 40 + 10 * unit(rng);  // temperature
    case 5:
      return std::round(1e6 * 0.002 * unit(rng)) / 1e6;  // a duration in µs
    case 6:
      return unit(rng) < 0.7 ? 0 : std::floor(100 * unit(rng));  // mostly idle
    case 7:
      return edges[rng() % std::size(edges)];
    case 8:
      return std::ldexp(unit(rng) - 0.5, static_cast<int>(rng() % 200) - 100);
    case 9:
      return static_cast<double>(static_cast<std::int64_t>(rng()));  // huge integers
    case 10:
      return std::round(unit(rng) * 1e4) / 1e4;  // a ratio
    // Integers near 2^53 beside decimals of 4 places, or beside float32 values of 7 digits: no
    // common scale fits in 64 bits.
    default:
      return t % 2 ? 9007199254740991.0 - t : id % 24 == 11 ? 0.0001 * (2 * t + 1) : 3.1234567 + t;
  }
}

}  // namespace

TEST_CASE(
    "sample codec: a block is stored by series (format 3) and reads back to the very values, "
    "bit for bit, for every kind of value and series coming and going") {
  std::mt19937_64 rng(39);
  for (int round = 0; round < 300; ++round) {
    const int n = 1 + static_cast<int>(rng() % 70);
    const std::uint32_t series = 1 + static_cast<std::uint32_t>(rng() % 60);
    std::vector<std::uint32_t> ids;
    for (std::uint32_t s = 0; s < series; ++s)
      ids.push_back(s + 1 + (round % 5 == 0 ? static_cast<std::uint32_t>(rng() % 4000000000u) : 0));
    std::vector<sample_codec::Tick> ticks;
    std::int64_t ts = 1'764'460'800'000 + static_cast<std::int64_t>(rng() % 1000);
    for (int t = 0; t < n; ++t) {
      Values v;
      for (auto id : ids) {
        // Some series come and go mid-block; a few are in no tick but one.
        if ((id % 7 == 3 && rng() % 3 == 0) || (id % 11 == 5 && t != n / 2)) continue;
        v.emplace_back(id, value_of_kind(id, t, rng));
      }
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end(), [](auto& a, auto& b) { return a.first == b.first; }),
              v.end());
      std::string blob;
      sample_codec::encode(blob, v);
      ticks.emplace_back(ts, std::move(blob));
      ts += 1 + static_cast<std::int64_t>(rng() % 2000);
    }
    const std::string block =
        sample_codec::pack_block(ticks.front().first, ticks.data(), ticks.data() + ticks.size());
    INFO("round " << round << ", " << n << " ticks");
    CHECK(block_layout(block) == 3);
    check_block_reads_back(block, ticks);
    // Its ticks as read (decoded values), packed again (a tier that keeps raw ticks longer):
    // format 3 again, the same values.
    std::string buf;
    BlockTicks back;
    REQUIRE(sample_codec::unpack_block(block, ticks.front().first, buf, back));
    std::vector<sample_codec::Tick> read;
    for (auto& [ts, blob] : back) read.emplace_back(ts, std::string(blob));
    const std::string again =
        sample_codec::pack_block(read.front().first, read.data(), read.data() + read.size());
    CHECK(block_layout(again) == 3);
    check_block_reads_back(again, ticks);
  }
}

TEST_CASE("sample codec: blocks written before format 3 still read back exactly") {
  std::mt19937_64 rng(7);
  std::vector<sample_codec::Tick> ticks;
  for (int t = 0; t < 60; ++t) {
    Values v;
    for (std::uint32_t id = 1; id <= 40; ++id) v.emplace_back(id, value_of_kind(id, t, rng));
    std::string blob;
    sample_codec::encode(blob, v);
    // Format 1 rows (schema version 1) in some ticks, as a store that was migrated holds.
    ticks.emplace_back(60'000 + t * 1000, t % 3 ? blob : encode_format1(v));
  }
  const std::string old = pack_block_ticks_layout(60'000, ticks);
  CHECK(block_layout(old) == 0);
  check_block_reads_back(old, ticks);
  // Blobs that are not all format 2 are still packed the old way, and read the same.
  const std::string repacked = sample_codec::pack_block(60'000, ticks.data(), ticks.data() + 60);
  CHECK(block_layout(repacked) == 0);
  check_block_reads_back(repacked, ticks);
}

TEST_CASE("sample codec: format 3 takes fewer bytes than the ticks layout on agent-like ticks") {
  std::mt19937_64 rng(3);
  for (int n : {10, 60}) {
    std::vector<sample_codec::Tick> ticks;
    for (int t = 0; t < n; ++t) {
      Values v;
      for (std::uint32_t id = 1; id <= 196; ++id)
        if (id % 12 != 7 && id % 12 != 8 && id % 12 != 9)
          v.emplace_back(id, value_of_kind(id, t, rng));
      std::string blob;
      sample_codec::encode(blob, v);
      ticks.emplace_back(t * 1000, std::move(blob));
    }
    const std::string old = pack_block_ticks_layout(0, ticks);
    const std::string now = sample_codec::pack_block(0, ticks.data(), ticks.data() + n);
    INFO(n << " ticks: " << old.size() << " bytes in the ticks layout, " << now.size()
           << " in format 3");
    CHECK(now.size() * 10 < old.size() * 9);
  }
}

TEST_CASE(
    "sample codec: a damaged format-3 block is refused or read as ticks, never misread into "
    "a crash or a huge allocation") {
  std::mt19937_64 rng(5);
  std::vector<sample_codec::Tick> ticks;
  for (int t = 0; t < 12; ++t) {
    Values v;
    for (std::uint32_t id = 1; id <= 24; ++id)
      if (id % 5 != static_cast<std::uint32_t>(t % 5))
        v.emplace_back(id, value_of_kind(id, t, rng));
    std::string blob;
    sample_codec::encode(blob, v);
    ticks.emplace_back(1000 + t * 1000, std::move(blob));
  }
  std::string buf;
  std::string data(*sample_codec::unpack(
      sample_codec::pack_block(1000, ticks.data(), ticks.data() + ticks.size()), buf));
  REQUIRE(data.front() == 3);
  BlockTicks back;
  REQUIRE(sample_codec::unpack_block(data, 1000, buf, back));  // a block stored not deflated
  for (std::size_t cut = 0; cut < data.size(); ++cut)
    CHECK_FALSE(sample_codec::unpack_block(data.substr(0, cut), 1000, buf, back));
  CHECK_FALSE(sample_codec::unpack_block(data + '\0', 1000, buf, back));  // trailing bytes
  for (std::size_t at = 0; at < data.size(); ++at)
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = data;
      flipped[at] = static_cast<char>(flipped[at] ^ (1 << bit));
      if (!sample_codec::unpack_block(flipped, 1000, buf, back)) continue;
      for (std::size_t i = 1; i < back.size(); ++i) CHECK(back[i].first > back[i - 1].first);
      for (auto& tick : back) CHECK_NOTHROW(sample_codec::decode(tick.second, [](auto, auto) {}));
    }
  // 2,000 series of 2,000 zeros: 6 kB that would read as 16 MB of blobs, past what a block of
  // this format may hold (pack_block() writes such a block in the ticks layout): refused.
  std::string huge(1, '\x03');
  sample_codec::put_varint(huge, 2000);
  for (int t = 0; t < 2000; ++t) huge.push_back(t == 0 ? 0 : 1);
  sample_codec::put_varint(huge, 2000);
  huge += std::string(2000, '\x01');
  for (int s = 0; s < 2000; ++s) sample_codec::put_varint(huge, 2000 << 3 | 3);
  CHECK_FALSE(sample_codec::unpack_block(huge, 0, buf, back));
}
