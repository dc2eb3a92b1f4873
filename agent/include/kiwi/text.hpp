// kiwi-agent plugin SDK: procfs and sysfs text cut into pieces, without a copy (every piece is a
// std::string_view into the text). kiwi/io.hpp (which includes this header) reads the files.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <optional>
#include <string_view>
#include <system_error>

namespace kiwi {

// Trims ASCII whitespace at both ends.
inline std::string_view trim(std::string_view s) {
  while (!s.empty() &&
         (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// Whether `c` separates fields: space, tab, and the '\r' and '\n' of line ends.
[[gnu::always_inline]] constexpr bool is_field_separator(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

// Splits off the next whitespace-separated field of `rest`; empty when the text is used up.
// It compares the bytes itself: find_first_not_of and find_first_of with a set look each byte up
// in the set, and cost the parsers of /proc/stat, diskstats and net/dev a third more
// instructions (callgrind, built -Os as the plugins are).
constexpr std::string_view next_field(std::string_view& rest) {
  std::size_t start = 0;
  while (start < rest.size() && is_field_separator(rest[start])) ++start;
  if (start == rest.size()) {
    rest = {};
    return {};
  }
  std::size_t end = start + 1;
  while (end < rest.size() && !is_field_separator(rest[end])) ++end;
  const std::string_view field = rest.substr(start, end - start);
  rest.remove_prefix(end);
  return field;
}

// The whole of `s` as a number of type T, or nullopt (empty, trailing text, out of range).
template <typename T>
std::optional<T> to_number(std::string_view s) {
  T value{};
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return value;
}

}  // namespace kiwi
