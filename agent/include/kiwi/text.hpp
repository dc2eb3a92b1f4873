// kiwi-agent plugin SDK: procfs and sysfs text split into lines, and a line into fields, without
// a copy or an allocation (every piece is a std::string_view into the text, valid as long as the
// text is). The parsers of the bundled sensors run on these once a second: a line costs one
// memchr and a field one scan, as in the hand-written loops they replaced (tools/bench/micro.cpp
// times the parsers).
//
//   for (std::string_view line : kiwi::Lines(text)) {
//     kiwi::Fields fields(line);
//     std::string_view key = fields.next();          // "" when the line has no fields
//     for (std::string_view value : fields) ...      // the fields after it
//   }
//
// kiwi/io.hpp (which includes this header) reads the files; these only cut text.
#pragma once

#include <charconv>
#include <cstddef>
#include <iterator>
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

// The lines of a text, each without its '\n'. A last line without a newline is a line; a
// newline at the very end does not start another one: "" has no lines, "a" and "a\n" one ("a"),
// "a\n\nb" three ("a", "", "b"). Only '\n' ends a line: the '\r' of a CRLF stays at the end of
// its line, where Fields and trim() treat it as white space (procfs and sysfs never write one; a
// parser of text from elsewhere strips it if it matters). A line may be any length.
//
// A range (for (auto line : Lines(text))), or read one at a time with next(), which also counts
// the lines for messages (number()).
class Lines {
 public:
  constexpr explicit Lines(std::string_view text) : rest_(text) {}

  // The next line, or nullopt after the last.
  constexpr std::optional<std::string_view> next() {
    if (rest_.empty()) return std::nullopt;
    ++number_;
    return take(rest_);
  }
  // The 1-based number of the line next() returned last (0 before the first).
  constexpr std::size_t number() const { return number_; }
  // The text after the line next() returned last.
  constexpr std::string_view rest() const { return rest_; }

  class iterator {
   public:
    using value_type = std::string_view;
    using difference_type = std::ptrdiff_t;
    constexpr iterator() = default;
    constexpr explicit iterator(std::string_view text) : rest_(text), done_(text.empty()) {
      if (!done_) line_ = take(rest_);
    }
    constexpr std::string_view operator*() const { return line_; }
    constexpr iterator& operator++() {
      done_ = rest_.empty();
      if (!done_) line_ = take(rest_);
      return *this;
    }
    constexpr iterator operator++(int) {
      iterator before = *this;
      ++*this;
      return before;
    }
    constexpr bool operator==(std::default_sentinel_t) const { return done_; }

   private:
    std::string_view rest_;
    std::string_view line_;
    bool done_ = true;
  };
  // From the line after the one next() returned last (the whole text before any next()).
  constexpr iterator begin() const { return iterator(rest_); }
  constexpr std::default_sentinel_t end() const { return {}; }

 private:
  // Cuts the first line off `text` (not empty) and returns it. Forced inline: built -Os, as the
  // plugins are, it was a call per line.
  [[gnu::always_inline]] static constexpr std::string_view take(std::string_view& text) {
    const std::size_t eol = text.find('\n');
    if (eol == std::string_view::npos) {
      const std::string_view line = text;
      text = {};
      return line;
    }
    const std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol + 1);
    return line;
  }

  std::string_view rest_;
  std::size_t number_ = 0;
};

// The whitespace-separated fields of a line (space, tab, '\r' and '\n', as next_field() splits
// them; runs of them count as one, and leading and trailing ones are not fields: "  8  0 sda " has
// the fields "8", "0", "sda"). A range (for (auto field : Fields(line))), or read one at a time
// with next(); a range-for after some next() calls goes through the fields left.
class Fields {
 public:
  explicit Fields(std::string_view line) : rest_(line) {}

  // The next field; empty after the last.
  std::string_view next() { return next_field(rest_); }
  // What is left of the line after the fields next() returned (from the separator after the
  // last of them).
  std::string_view rest() const { return rest_; }

  class iterator {
   public:
    using value_type = std::string_view;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    explicit iterator(std::string_view rest) : rest_(rest) { field_ = next_field(rest_); }
    std::string_view operator*() const { return field_; }
    iterator& operator++() {
      field_ = next_field(rest_);
      return *this;
    }
    iterator operator++(int) {
      iterator before = *this;
      ++*this;
      return before;
    }
    bool operator==(std::default_sentinel_t) const { return field_.empty(); }

   private:
    std::string_view rest_;
    std::string_view field_;
  };
  iterator begin() const { return iterator(rest_); }
  std::default_sentinel_t end() const { return {}; }

 private:
  std::string_view rest_;
};

}  // namespace kiwi
