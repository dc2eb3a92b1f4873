// Pure functions for the power sensor: the Raspberry Pi firmware's throttling word. No file I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kiwi::power {

// The flags of the word get_throttled holds (the firmware's, as `vcgencmd get_throttled` shows
// it): bit n is the condition now, bit n + 16 the same since boot.
struct ThrottleFlag {
  std::string_view name;  // the `flag` label
  unsigned bit;           // its "now" bit
};
inline constexpr ThrottleFlag kThrottleFlags[] = {
    {"under_voltage", 0},
    {"frequency_capped", 1},
    {"throttled", 2},
    {"soft_temperature_limit", 3},
};

// The word as the kernel's raspberrypi-hwmon/firmware driver prints it: hex, with or without 0x
// ("50005", "0x50005"), then a newline. nullopt for anything else.
std::optional<std::uint32_t> parse_throttled(std::string_view text);

}  // namespace kiwi::power
