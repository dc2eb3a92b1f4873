// The agent's log line (log.cpp): one line of text whatever a message holds (issue 16, item 1), the
// last line of defence behind the messages that quote untrusted text (kiwi::quote_excerpt).
#include <catch2/catch.hpp>
#include <string>

#include "base/log.hpp"

using kiwi::agent::append_log_text;

namespace {
std::string line_of(std::string_view message) {
  std::string line;
  append_log_text(line, message);
  return line;
}
}  // namespace

TEST_CASE("log: control bytes and bytes that are not UTF-8 are escaped as hex, one line") {
  CHECK(line_of("plain text, caf\xc3\xa9 \xe2\x80\xa6") == "plain text, caf\xc3\xa9 \xe2\x80\xa6");
  CHECK(line_of("two\nlines\r\tand \x1b[31mred") == "two\\x0alines\\x0d\\x09and \\x1b[31mred");
  CHECK(line_of("mnt-\xff\xfe-\"quote") == "mnt-\\xff\\xfe-\"quote");
  CHECK(line_of(std::string("nul\0byte\x7f", 9)) == "nul\\x00byte\\x7f");
  CHECK(line_of("\xe2\x80") == "\\xe2\\x80");  // a character cut short
}

TEST_CASE("log: a message over 16 KiB is cut, with its size") {
  const std::string big(100 * 1024 * 1024, 'x');
  const std::string line = line_of(big);
  CHECK(line == std::string(kiwi::agent::kLogMessageMax, 'x') + "...(104857600 bytes)");
}
