// Pure functions for the cpufreq sensor: the text of <sysfs>/devices/system/cpu/cpufreq/policyN/
// attributes. No file I/O, so each is tested on fixture text.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kiwi::cpufreq {

// A frequency attribute (scaling_cur_freq, cpuinfo_max_freq, ...): kHz, a whole number and a
// newline. The frequency in hertz; nullopt for anything else.
std::optional<double> parse_khz(std::string_view text);

// A one-word attribute (scaling_governor, scaling_driver): the word, trimmed; nullopt when it is
// empty or not one printable word (it becomes a label value).
std::optional<std::string> parse_word(std::string_view text);

// A CPU list (related_cpus: "0 1 2 3", or the kernel's range form "0-3,6") as a short range list:
// "0-3", "4-5", "0-3,6"; nullopt when it is not a list of CPU numbers.
std::optional<std::string> parse_cpu_list(std::string_view text);

}  // namespace kiwi::cpufreq
