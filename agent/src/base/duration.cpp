#include "base/duration.hpp"

#include <cstdint>

namespace kiwi::agent {

namespace {
struct Unit {
  std::string_view suffix;
  std::int64_t ms;
};
// Longest suffix first so "ms" is not read as "m".
constexpr Unit kUnits[] = {
    {"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}, {"d", 86'400'000}};
constexpr std::int64_t kMaxMs = std::int64_t{1} << 50;  // ~35,000 years: plenty, no overflow
}  // namespace

std::optional<Millis> parse_duration(std::string_view text) {
  if (text.empty()) return std::nullopt;
  std::int64_t total = 0;
  while (!text.empty()) {
    std::int64_t n = 0;
    std::size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
      n = n * 10 + (text[digits] - '0');
      if (n > kMaxMs) return std::nullopt;
      ++digits;
    }
    if (digits == 0) return std::nullopt;
    text.remove_prefix(digits);
    const Unit* unit = nullptr;
    for (const auto& u : kUnits)
      if (text.starts_with(u.suffix)) {
        unit = &u;
        break;
      }
    if (!unit) return std::nullopt;
    text.remove_prefix(unit->suffix.size());
    if (n > kMaxMs / unit->ms) return std::nullopt;
    total += n * unit->ms;
    if (total > kMaxMs) return std::nullopt;
  }
  return Millis(total);
}

std::string format_duration(Millis d) {
  std::int64_t ms = d.count();
  for (auto it = std::rbegin(kUnits); it != std::rend(kUnits); ++it)
    if (ms != 0 && ms % it->ms == 0) return std::to_string(ms / it->ms) + std::string(it->suffix);
  return std::to_string(ms) + "ms";
}

}  // namespace kiwi::agent
