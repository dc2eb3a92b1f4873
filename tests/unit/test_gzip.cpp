// The SDK's gzip helpers (kiwi/gzip.hpp): what the server sends as Content-Encoding: gzip, and
// gunzip for bodies embedded compressed (the dashboard).
#include <catch2/catch.hpp>

#include <kiwi/gzip.hpp>

#include <string>

TEST_CASE("gzip and gunzip round-trip, and a kept gzip holds only its bytes") {
  std::string text;
  for (int i = 0; i < 400; ++i)
    text += "{\"ts\":" + std::to_string(1700000000 + i) + ",\"v\":0.25},";
  const std::string gz = kiwi::gzip(text);
  CHECK(gz.size() < text.size() / 4);
  CHECK(gz.capacity() < gz.size() + 32);  // not the worst-case buffer deflate was given
  CHECK(static_cast<unsigned char>(gz[0]) == 0x1f);
  CHECK(static_cast<unsigned char>(gz[1]) == 0x8b);
  CHECK(kiwi::gunzip(gz) == text);
  CHECK(kiwi::gunzip(kiwi::gzip("")).empty());
  // Output many times the input: the buffer grows as inflate needs.
  const std::string zeros(1 << 20, '\0');
  CHECK(kiwi::gunzip(kiwi::gzip(zeros)) == zeros);
}

TEST_CASE("gunzip refuses what is not a complete gzip stream") {
  const std::string gz = kiwi::gzip(std::string(5000, 'x'));
  CHECK_THROWS_WITH(kiwi::gunzip(gz.substr(0, gz.size() / 2)),
                    Catch::Contains("not a complete gzip stream"));
  CHECK_THROWS_WITH(kiwi::gunzip("plain text, not gzip"),
                    Catch::Contains("not a complete gzip stream"));
  CHECK_THROWS_WITH(kiwi::gunzip(""), Catch::Contains("not a complete gzip stream"));
}
