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
  refused(std::string_view("\x01\x0e", 2));            // format 2: tag 6 does not exist
  refused(std::string_view("\x01\x0f", 2));            // format 2: tag 7 does not exist
  refused(std::string_view("\x01\x09\x00\x00", 4));    // format 2: float32 cut short
  CHECK(decode(std::string_view("\x01", 1)).empty());  // a tick without values
  CHECK(decode(std::string_view("\x01\x0b\x0b", 3)) == Values{{1, 0}, {2, 0}});
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
    CHECK(back[i].second == ticks[i].second);
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
  CHECK(back == std::vector<std::pair<std::int64_t, std::string_view>>{{5000, one.second}});
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
