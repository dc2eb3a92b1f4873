#include "base/size.hpp"

namespace kiwi::agent {

namespace {
struct Unit {
  std::string_view suffix;
  std::uint64_t bytes;
};
// Exact, case-sensitive spellings only: "mb" or "Mb" (megabits?) are refused rather than guessed.
constexpr Unit kUnits[] = {{"", 1},
                           {"B", 1},
                           {"KiB", 1ull << 10},
                           {"MiB", 1ull << 20},
                           {"GiB", 1ull << 30},
                           {"TiB", 1ull << 40},
                           {"kB", 1'000},
                           {"MB", 1'000'000},
                           {"GB", 1'000'000'000},
                           {"TB", 1'000'000'000'000}};
// Exactly representable as a double (the JSON and metric side), and far beyond any real limit.
constexpr std::uint64_t kMaxBytes = 1ull << 53;
}  // namespace

std::optional<std::uint64_t> parse_size(std::string_view text) {
  std::uint64_t n = 0;
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    n = n * 10 + static_cast<std::uint64_t>(text[digits] - '0');
    if (n > kMaxBytes) return std::nullopt;
    ++digits;
  }
  if (digits == 0) return std::nullopt;
  const std::string_view suffix = text.substr(digits);
  for (const auto& u : kUnits)
    if (suffix == u.suffix) {
      if (n > kMaxBytes / u.bytes) return std::nullopt;
      return n * u.bytes;
    }
  return std::nullopt;
}

}  // namespace kiwi::agent
