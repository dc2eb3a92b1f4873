// The store's sample codec: decode() on any blob (a corrupt row) gives values or StoreError, and
// unpack() / unpack_block() on any row give its data or refuse it (ticks that rise in time);
// values taken from the input, encoded, decode to the same ids, every value finite or not as it
// was, and a block of ticks made from them is stored by series (format 3) and unpacks to blobs of
// the very same values, bit for bit. Any input is also read as a block of either layout (seeds of
// both in the corpus).
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "fuzz_support.hpp"
#include "store/sample_codec.hpp"

using namespace kiwi::agent;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in = kiwi_fuzz::text(data, size);
  try {
    sample_codec::decode(in, [](std::uint32_t, double) {});
  } catch (const kiwi::StoreError&) {
  }
  std::string buf;
  (void)sample_codec::unpack(in, buf);
  std::vector<std::pair<std::int64_t, std::string_view>> ticks;
  if (sample_codec::unpack_block(in, 0, buf, ticks))
    for (std::size_t i = 1; i < ticks.size(); ++i)
      KIWI_FUZZ_CHECK(ticks[i].first > ticks[i - 1].first);
  // 12 bytes per value: a 32-bit id and a double.
  std::vector<std::pair<std::uint32_t, double>> values;
  for (std::size_t at = 0; at + 12 <= in.size(); at += 12) {
    std::uint32_t id;
    double v;
    std::memcpy(&id, in.data() + at, 4);
    std::memcpy(&v, in.data() + at + 4, 8);
    bool duplicate = false;
    for (auto& [i, _] : values) duplicate = duplicate || i == id;
    if (!duplicate) values.emplace_back(id, v);
  }
  auto sorted = values;
  std::string blob;
  sample_codec::encode(blob, sorted);
  std::vector<std::pair<std::uint32_t, double>> back;
  sample_codec::decode(blob, [&](std::uint32_t id, double v) { back.emplace_back(id, v); });
  KIWI_FUZZ_CHECK(back.size() == sorted.size());
  for (std::size_t i = 0; i < back.size(); ++i) {
    KIWI_FUZZ_CHECK(back[i].first == sorted[i].first);
    KIWI_FUZZ_CHECK(std::isnan(back[i].second) == std::isnan(sorted[i].second));
  }
  // A block of three ticks (format 3): the values, every other one of them, and the values again
  // with each id's neighbour's value, so series come and go and change kind between ticks.
  auto some = values, swapped = values;
  std::erase_if(some, [&](auto& e) { return (&e - values.data()) % 2 == 0; });
  for (std::size_t i = 0; i + 1 < swapped.size(); i += 2)
    std::swap(swapped[i].second, swapped[i + 1].second);
  std::string blob2, blob3;
  sample_codec::encode(blob2, some);
  sample_codec::encode(blob3, swapped);
  const std::vector<sample_codec::Tick> made{{0, blob}, {1000, blob2}, {2500, blob3}};
  const std::string block = sample_codec::pack_block(0, made.data(), made.data() + 3);
  KIWI_FUZZ_CHECK(sample_codec::unpack_block(block, 0, buf, ticks));
  KIWI_FUZZ_CHECK(ticks.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    KIWI_FUZZ_CHECK(ticks[i].first == made[i].first);
    std::vector<std::pair<std::uint32_t, std::uint64_t>> want, got;
    const auto bits = [](auto& out) {
      return [&out](std::uint32_t id, double v) {
        out.emplace_back(id, std::bit_cast<std::uint64_t>(v));
      };
    };
    sample_codec::decode(made[i].second, bits(want));
    sample_codec::decode(ticks[i].second, bits(got));
    KIWI_FUZZ_CHECK(got == want);  // bit for bit, NaN payloads too
  }
  auto stored = sample_codec::unpack(block, buf);
  KIWI_FUZZ_CHECK(stored && !stored->empty() && stored->front() == 3);  // every encode() blob fits
  return 0;
}
