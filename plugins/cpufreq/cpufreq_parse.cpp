#include "cpufreq_parse.hpp"

#include <algorithm>
#include <cstdint>
#include <kiwi/text.hpp>
#include <set>

namespace kiwi::cpufreq {

std::optional<double> parse_khz(std::string_view text) {
  const auto khz = kiwi::to_number<std::uint64_t>(kiwi::trim(text));
  return khz ? std::optional<double>(static_cast<double>(*khz) * 1000.0) : std::nullopt;
}

std::optional<std::string> parse_word(std::string_view text) {
  text = kiwi::trim(text);
  if (text.empty() || text.size() > 64 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c > ' ' && c < 0x7f; }))
    return std::nullopt;
  return std::string(text);
}

std::optional<std::string> parse_cpu_list(std::string_view text) {
  std::set<unsigned> cpus;
  text = kiwi::trim(text);
  while (!text.empty()) {
    const std::size_t end = text.find_first_of(" ,");
    const std::string_view item = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    if (item.empty()) continue;
    const std::size_t dash = item.find('-');
    const auto first = kiwi::to_number<unsigned>(item.substr(0, dash));
    const auto last =
        dash == std::string_view::npos ? first : kiwi::to_number<unsigned>(item.substr(dash + 1));
    if (!first || !last || *last < *first || *last - *first > 4096) return std::nullopt;
    for (unsigned cpu = *first; cpu <= *last; ++cpu) cpus.insert(cpu);
  }
  if (cpus.empty()) return std::nullopt;
  std::string out;
  for (auto it = cpus.begin(); it != cpus.end();) {
    const unsigned first = *it;
    unsigned last = first;
    while (++it != cpus.end() && *it == last + 1) ++last;
    if (!out.empty()) out += ',';
    out += std::to_string(first);
    if (last != first) out += '-' + std::to_string(last);
  }
  return out;
}

}  // namespace kiwi::cpufreq
