// kiwi/text.hpp: procfs and sysfs text into lines and a line into fields, as views of the text.
#include <catch2/catch.hpp>

#include <kiwi/text.hpp>
#include <string>
#include <vector>

namespace {

using Views = std::vector<std::string_view>;

Views lines_of(std::string_view text) {
  Views out;
  for (std::string_view line : kiwi::Lines(text)) out.push_back(line);
  return out;
}

Views fields_of(std::string_view line) {
  Views out;
  for (std::string_view field : kiwi::Fields(line)) out.push_back(field);
  return out;
}

// Whether every piece lies inside `text`: a view of it, not a copy.
bool inside(std::string_view text, const Views& pieces) {
  for (auto p : pieces)
    if (p.data() < text.data() || p.data() + p.size() > text.data() + text.size()) return false;
  return true;
}

}  // namespace

TEST_CASE("text: lines without their newline, and a last line without one is a line") {
  CHECK(lines_of("").empty());
  CHECK(lines_of("a") == Views{"a"});
  CHECK(lines_of("a\n") == Views{"a"});  // a final newline starts no line
  CHECK(lines_of("a\nb") == Views{"a", "b"});
  CHECK(lines_of("a\nb\n") == Views{"a", "b"});
  CHECK(lines_of("\n") == Views{""});
  CHECK(lines_of("\n\n") == Views{"", ""});
  CHECK(lines_of("a\n\nb\n\n") == Views{"a", "", "b", ""});  // empty lines are lines
  const std::string text = "cpu  1 2 3\ncpu0 4 5 6\nintr 7";
  const Views lines = lines_of(text);
  CHECK(lines == Views{"cpu  1 2 3", "cpu0 4 5 6", "intr 7"});
  CHECK(inside(text, lines));
}

TEST_CASE(
    "text: CRLF keeps its carriage return in the line, which fields and trim treat as white "
    "space") {
  CHECK(lines_of("a\r\nb\r\n") == Views{"a\r", "b\r"});
  CHECK(lines_of("\r\n") == Views{"\r"});
  CHECK(fields_of("x 1\r") == Views{"x", "1"});
  CHECK(kiwi::trim("key: value\r") == "key: value");
  CHECK(lines_of("only\rcarriage") == Views{"only\rcarriage"});  // a lone \r ends nothing
}

TEST_CASE("text: a very long line and a text of many lines go through whole") {
  const std::string long_line(5'000'000, 'x');
  CHECK(lines_of(long_line + "\nshort\n") == Views{long_line, "short"});
  std::string many;
  for (int i = 0; i < 100000; ++i) many += std::to_string(i) + " a b\n";
  kiwi::Lines lines(many);
  std::size_t n = 0;
  while (auto line = lines.next()) {
    REQUIRE(*line == std::to_string(n) + " a b");
    ++n;
    CHECK(lines.number() == n);
  }
  CHECK(n == 100000);
  CHECK(lines.rest().empty());
  CHECK(fields_of(std::string(1'000'000, ' ') + "x" + std::string(1'000'000, '\t')) == Views{"x"});
}

TEST_CASE("text: next() numbers the lines, and a range-for goes on from where it stopped") {
  kiwi::Lines lines("header\n\nrow 1\nrow 2");
  CHECK(lines.number() == 0);
  CHECK(lines.next() == "header");
  CHECK(lines.number() == 1);
  CHECK(lines.next() == "");  // an empty line counts
  CHECK(lines.number() == 2);
  CHECK(lines.rest() == "row 1\nrow 2");
  Views rest;
  for (auto line : lines) rest.push_back(line);
  CHECK(rest == Views{"row 1", "row 2"});
  CHECK(lines.next() == "row 1");  // the range-for read copies; next() is where it was
  CHECK(lines.next() == "row 2");
  CHECK(lines.number() == 4);
  CHECK(lines.next() == std::nullopt);
  CHECK(lines.number() == 4);
  CHECK(kiwi::Lines("").next() == std::nullopt);
}

TEST_CASE("text: fields split at runs of spaces and tabs, none at either end") {
  CHECK(fields_of("").empty());
  CHECK(fields_of("   \t ").empty());
  CHECK(fields_of("a") == Views{"a"});
  CHECK(fields_of("  8   0 sda 1\t2 ") == Views{"8", "0", "sda", "1", "2"});
  CHECK(fields_of("eth0:1234 5") == Views{"eth0:1234", "5"});  // only white space separates
  const std::string line = " cpu0 10 20 ";
  CHECK(inside(line, fields_of(line)));

  kiwi::Fields fields("cpu3 1 2 3");
  CHECK(fields.next() == "cpu3");
  CHECK(fields.rest() == " 1 2 3");
  Views counters;
  for (auto f : fields) counters.push_back(f);
  CHECK(counters == Views{"1", "2", "3"});
  CHECK(fields.next() == "1");
  CHECK(fields.next() == "2");
  CHECK(fields.next() == "3");
  CHECK(fields.next() == "");
  CHECK(fields.next() == "");  // and stays at the end
  CHECK(fields.rest().empty());
}

TEST_CASE("text: next_field, trim and to_number, the pieces the parsers are made of") {
  std::string_view rest = "  12 x\n";
  CHECK(kiwi::next_field(rest) == "12");
  CHECK(rest == " x\n");
  CHECK(kiwi::next_field(rest) == "x");
  CHECK(kiwi::next_field(rest) == "");
  CHECK(rest.empty());
  CHECK(kiwi::trim(" \t a b \r\n") == "a b");
  CHECK(kiwi::trim("   ") == "");
  CHECK(kiwi::to_number<int>("42") == 42);
  CHECK(kiwi::to_number<int>("-1") == -1);
  CHECK(kiwi::to_number<int>("") == std::nullopt);
  CHECK(kiwi::to_number<int>("4x") == std::nullopt);
  CHECK(kiwi::to_number<std::uint64_t>("18446744073709551616") == std::nullopt);  // 2^64
  CHECK(kiwi::to_number<double>("0.5") == 0.5);
}
