#include <catch2/catch.hpp>

#include "base/duration.hpp"

using kiwi::agent::format_duration;
using kiwi::agent::Millis;
using kiwi::agent::parse_duration;

TEST_CASE("duration: the forms people write in the TOML") {
  CHECK(parse_duration("500ms") == Millis(500));
  CHECK(parse_duration("1s") == Millis(1000));
  CHECK(parse_duration("5m") == Millis(300'000));
  CHECK(parse_duration("24h") == Millis(86'400'000));
  CHECK(parse_duration("7d") == Millis(7 * 86'400'000LL));
  CHECK(parse_duration("1h30m") == Millis(5'400'000));
}

TEST_CASE("duration: anything else is refused, not guessed") {
  for (auto bad : {"", "1", "s", "1 s", "-1s", "1.5s", "1x", "1sec", "ms", "99999999999999999999d"})
    CHECK_FALSE(parse_duration(bad).has_value());
}

TEST_CASE("duration: formatted back in the largest exact unit") {
  CHECK(format_duration(Millis(86'400'000)) == "1d");
  CHECK(format_duration(Millis(3'600'000)) == "1h");
  CHECK(format_duration(Millis(90'000)) == "90s");
  CHECK(format_duration(Millis(1500)) == "1500ms");
}
