// The network sensor's parsers: /proc/net/dev and a link speed file.
#include <cmath>
#include <stdexcept>

#include "fuzz_support.hpp"
#include "network_parse.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in = kiwi_fuzz::text(data, size);
  try {
    (void)kiwi::network::parse_net_dev(in);
  } catch (const std::invalid_argument&) {
  }
  if (auto speed = kiwi::network::parse_link_speed(in)) KIWI_FUZZ_CHECK(std::isfinite(*speed));
  return 0;
}
