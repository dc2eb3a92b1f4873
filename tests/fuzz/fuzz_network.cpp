// The network sensor's parsers: /proc/net/dev and a link speed file.
#include <cmath>

#include "fuzz_support.hpp"
#include "network_parse.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in = kiwi_fuzz::text(data, size);
  const auto dev = kiwi::network::parse_net_dev(in);  // never throws: a bad line is skipped
  KIWI_FUZZ_CHECK(dev.skipped == 0 || !dev.first_skipped.empty());
  if (auto speed = kiwi::network::parse_link_speed(in)) KIWI_FUZZ_CHECK(std::isfinite(*speed));
  return 0;
}
