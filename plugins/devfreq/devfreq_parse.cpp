#include "devfreq_parse.hpp"

#include <cstdint>
#include <kiwi/text.hpp>

namespace kiwi::devfreq {

std::optional<double> parse_hertz(std::string_view text) {
  const auto v = kiwi::to_number<std::uint64_t>(kiwi::trim(text));
  return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
}

std::optional<double> parse_load(std::string_view text) {
  text = kiwi::trim(text);
  const std::size_t at = text.find('@');
  if (at == std::string_view::npos || !text.ends_with("Hz")) return std::nullopt;
  const auto percent = kiwi::to_number<std::uint32_t>(text.substr(0, at));
  const auto hz = kiwi::to_number<std::uint64_t>(text.substr(at + 1, text.size() - at - 3));
  if (!percent || !hz || *percent > 100) return std::nullopt;
  return *percent / 100.0;
}

}  // namespace kiwi::devfreq
