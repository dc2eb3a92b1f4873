#include "power_parse.hpp"

#include <charconv>
#include <kiwi/text.hpp>

namespace kiwi::power {

std::optional<std::uint32_t> parse_throttled(std::string_view text) {
  text = kiwi::trim(text);
  if (text.starts_with("0x") || text.starts_with("0X")) text.remove_prefix(2);
  std::uint32_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 16);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

}  // namespace kiwi::power
