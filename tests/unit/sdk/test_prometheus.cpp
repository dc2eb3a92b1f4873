// kiwi/prometheus.hpp: the name rules (the exposition format's, and the agent's stricter ones for
// what a sensor emits) and the text format's escaping, with the edge cases of each.
#include <catch2/catch.hpp>

#include <kiwi/prometheus.hpp>
#include <string>

namespace prom = kiwi::prometheus;

TEST_CASE("prometheus: metric names as the exposition format has them, colons included") {
  CHECK(prom::is_metric_name("cpu_usage_ratio"));
  CHECK(prom::is_metric_name("_private"));
  CHECK(prom::is_metric_name("job:errors:rate5m"));  // recording-rule style
  CHECK(prom::is_metric_name(":"));
  CHECK(prom::is_metric_name("a"));
  CHECK(prom::is_metric_name("A9_z:"));
  CHECK(prom::is_metric_name("__name__"));
  CHECK_FALSE(prom::is_metric_name(""));
  CHECK_FALSE(prom::is_metric_name("9lives"));
  CHECK_FALSE(prom::is_metric_name("bad-name"));
  CHECK_FALSE(prom::is_metric_name("bad name"));
  CHECK_FALSE(prom::is_metric_name("x."));
  CHECK_FALSE(prom::is_metric_name("caf\xc3\xa9"));  // ASCII only
  CHECK_FALSE(prom::is_metric_name(std::string("a\0b", 3)));
  static_assert(prom::is_metric_name("compile_time:ok"));
}

TEST_CASE("prometheus: label names as the exposition format has them, no colon, __ allowed") {
  CHECK(prom::is_label_name("core"));
  CHECK(prom::is_label_name("_x"));
  CHECK(prom::is_label_name("__name__"));  // parses; the agent refuses it from a sensor
  CHECK(prom::is_label_name("a1"));
  CHECK_FALSE(prom::is_label_name(""));
  CHECK_FALSE(prom::is_label_name("1a"));
  CHECK_FALSE(prom::is_label_name("a:b"));
  CHECK_FALSE(prom::is_label_name(":"));
  CHECK_FALSE(prom::is_label_name("bad-label"));
}

TEST_CASE("prometheus: what the agent takes from a sensor: no colon, no label name with __") {
  CHECK(prom::is_sensor_metric_name("cpu_usage_ratio"));
  CHECK(prom::is_sensor_metric_name("_private"));
  CHECK(prom::is_sensor_metric_name("__also_fine_for_a_metric"));
  CHECK_FALSE(prom::is_sensor_metric_name("colon:name"));  // the exposition allows it
  CHECK_FALSE(prom::is_sensor_metric_name(":"));
  CHECK_FALSE(prom::is_sensor_metric_name(""));
  CHECK_FALSE(prom::is_sensor_metric_name("9starts_with_digit"));
  CHECK_FALSE(prom::is_sensor_metric_name("chaos bad name"));

  CHECK(prom::is_sensor_label_name("interface"));
  CHECK(prom::is_sensor_label_name("_x"));
  CHECK(prom::is_sensor_label_name("a__b"));
  CHECK_FALSE(prom::is_sensor_label_name("__name__"));
  CHECK_FALSE(prom::is_sensor_label_name("__"));
  CHECK_FALSE(prom::is_sensor_label_name("bad-label"));
  CHECK_FALSE(prom::is_sensor_label_name("a:b"));
  CHECK_FALSE(prom::is_sensor_label_name(""));
  // Every name the agent takes is one the exposition format takes.
  for (const char* name : {"a", "_", "a_1", "Z9", "__x"}) {
    CHECK(prom::is_metric_name(name) == true);
    if (prom::is_sensor_label_name(name)) CHECK(prom::is_label_name(name));
  }
}

TEST_CASE(
    "prometheus: label values escape backslash, quote and newline, HELP text backslash and "
    "newline") {
  CHECK(prom::escape_label_value("") == "");
  CHECK(prom::escape_label_value("plain") == "plain");
  CHECK(prom::escape_label_value("\"x\"") == "\\\"x\\\"");
  CHECK(prom::escape_label_value("a\\b\nc\"") == "a\\\\b\\nc\\\"");
  CHECK(prom::escape_label_value("\r\t") == "\r\t");  // nothing else is escaped
  CHECK(prom::escape_help("") == "");
  CHECK(prom::escape_help("a \"quoted\" path\\to\nnext") == "a \"quoted\" path\\\\to\\nnext");
  CHECK(prom::escape_help("\n\\") == "\\n\\\\");
  std::string out = "x=\"";
  prom::append_escaped_label_value(out, "\\");
  CHECK(out == "x=\"\\\\");  // appends, keeps what was there
}

TEST_CASE("prometheus: escaping then unescaping gives the text back, at the ends and in between") {
  const std::string cases[] = {"",
                               "plain",
                               "\\",
                               "\"",
                               "\n",
                               "\\\\n",
                               "a\\nb",
                               "\"quoted\" and \\back\\slashed\nline\n",
                               "tail\\",
                               std::string("nul\0byte", 8),
                               "caf\xc3\xa9 \xff raw",
                               std::string(100000, '\\')};
  for (const std::string& text : cases) {
    CHECK(prom::unescape_label_value(prom::escape_label_value(text)) == text);
    CHECK(prom::unescape_help(prom::escape_help(text)) == text);
  }
}

TEST_CASE("prometheus: an invalid escape or a stray quote is refused, with where it is") {
  CHECK(prom::unescape_label_value("a\\tb") == std::nullopt);
  CHECK(prom::unescape_label_value("trailing\\") == std::nullopt);
  CHECK(prom::unescape_label_value("a\"b") == std::nullopt);  // the quote would end the value
  CHECK(prom::unescape_help("a\\\"b") == std::nullopt);       // \" is a label value's, not HELP's
  CHECK(prom::unescape_help("a\\") == std::nullopt);
  CHECK(prom::unescape_help("a\"b") == "a\"b");
  CHECK(prom::find_bad_help_escape("ok\\\\ \\n") == std::string_view::npos);
  CHECK(prom::find_bad_help_escape("ab\\x") == 2);
  CHECK(prom::find_bad_help_escape("\\\\\\") == 2);

  std::string value;
  auto read = prom::read_label_value(R"(a\"b\\c" rest)", value);
  CHECK(read.stop == prom::LabelValueRead::Stop::quote);
  CHECK(read.at == 7);  // the closing quote
  CHECK(value == "a\"b\\c");
  value.clear();
  read = prom::read_label_value("no end", value);
  CHECK(read.stop == prom::LabelValueRead::Stop::end);
  CHECK(read.at == 6);
  CHECK(value == "no end");
  value.clear();
  read = prom::read_label_value("ab\\q\"", value);
  CHECK(read.stop == prom::LabelValueRead::Stop::bad_escape);
  CHECK(read.at == 2);
  value.clear();
  read = prom::read_label_value("ab\\", value);
  CHECK(read.stop == prom::LabelValueRead::Stop::bad_escape);
  CHECK(read.at == 2);
  value.clear();
  read = prom::read_label_value("\"", value);
  CHECK(read.stop == prom::LabelValueRead::Stop::quote);
  CHECK(read.at == 0);
  CHECK(value.empty());
}
