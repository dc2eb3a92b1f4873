#include <catch2/catch.hpp>

#include "base/size.hpp"

using kiwi::agent::parse_size;

TEST_CASE("size: bytes, binary and decimal units") {
  CHECK(parse_size("0") == 0u);
  CHECK(parse_size("512") == 512u);
  CHECK(parse_size("512B") == 512u);
  CHECK(parse_size("64KiB") == 65'536u);
  CHECK(parse_size("1MiB") == 1'048'576u);
  CHECK(parse_size("2GiB") == 2'147'483'648u);
  CHECK(parse_size("1TiB") == 1'099'511'627'776u);
  CHECK(parse_size("10kB") == 10'000u);
  CHECK(parse_size("5MB") == 5'000'000u);
  CHECK(parse_size("3GB") == 3'000'000'000u);
  CHECK(parse_size("1TB") == 1'000'000'000'000u);
  CHECK(parse_size("8388608GiB") == 1ull << 53);
  CHECK(parse_size("9007199254740992") == 9'007'199'254'740'992u);  // 2^53, the ceiling
}

TEST_CASE("size: anything else is refused, not guessed") {
  for (auto bad : {"",           "B",
                   "MiB",        "-1",
                   "+1",         "1.5MiB",
                   "1 MiB",      " 1",
                   "1 ",         "1mib",
                   "1mb",        "1Mb",
                   "1K",         "1M",
                   "1k",         "1KB",
                   "1kiB",       "1MiBs",
                   "0x10",       "9007199254740993",
                   "8388609GiB", "99999999999999999999999"}) {
    INFO(bad);
    CHECK_FALSE(parse_size(bad).has_value());
  }
}
