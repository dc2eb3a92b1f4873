// Pure functions for the devfreq sensor: the text of <sysfs>/class/devfreq/<device>/ attributes.
// No file I/O, so each is tested on fixture text.
#pragma once

#include <optional>
#include <string_view>

namespace kiwi::devfreq {

// A frequency attribute (cur_freq, min_freq, max_freq): hertz, a whole number and a newline.
// nullopt for anything else.
std::optional<double> parse_hertz(std::string_view text);

// The `load` attribute of Rockchip's and Android's kernels: "23@300000000Hz" is 23 % busy at
// 300 MHz over the last polling interval. The share as a ratio (0.23); nullopt when it is not
// that shape or the percentage is over 100.
std::optional<double> parse_load(std::string_view text);

}  // namespace kiwi::devfreq
