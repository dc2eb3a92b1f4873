// Options against their rows (config/options.hpp): a row's choices, for a plugin's table. The typed
// kinds (durations, sizes, ranges) are tested with the loader (tests/unit/plugin).
#include <catch2/catch.hpp>

#include "config/options.hpp"
#include "options_support.hpp"

using namespace kiwi::agent;
using kiwi::OptionSpec;
using kiwi::OptionType;

namespace {

constexpr OptionSpec kRows[] = {
    {"format", OptionType::string, "\"prometheus\"", "what the program prints", false, 0, 0,
     "prometheus,json"},
    {"workers", OptionType::integer, "\"auto\"", "threads", true, 1, 64, "auto"},
    {"name", OptionType::string, "\"x\"", "any string"},
};
const kiwi::PluginInfo kInfo{kiwi::PluginKind::sensor, "chooser", "", kRows, kiwi::no_metrics};

kiwi::Options options(const std::string& toml) {
  return validate_options(kInfo, kiwi::test::options_table("[options]\n" + toml), "kiwi.toml",
                          "sensor");
}
std::string error_of(const std::string& toml) {
  try {
    options(toml);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("options: a string row with choices takes one of them, and its error lists them") {
  CHECK(options("").get_string("format") == "prometheus");
  CHECK(options("format = \"json\"").get_string("format") == "json");
  CHECK(error_of("format = \"xml\"") ==
        "kiwi.toml:2:10: sensor.options.format: expected one of \"prometheus\" or \"json\", not "
        "\"xml\"");
  CHECK(error_of("format = \"JSON\"") ==
        "kiwi.toml:2:10: sensor.options.format: expected one of \"prometheus\" or \"json\", not "
        "\"JSON\"");
  CHECK(error_of("format = 1") ==
        "kiwi.toml:2:10: sensor.options.format: expected one of \"prometheus\" or \"json\"");
  CHECK(options("name = \"anything\"").get_string("name") == "anything");  // no choices, no check
}

TEST_CASE("options: an integer row with choices takes those words besides numbers in range") {
  const auto word = options("");
  CHECK(word.values()[1].string == "auto");
  CHECK(word.get_int("workers") == 0);
  const auto number = options("workers = 8");
  CHECK(number.get_int("workers") == 8);
  CHECK(number.values()[1].string.empty());
  CHECK(error_of("workers = \"many\"") ==
        "kiwi.toml:2:11: sensor.options.workers: expected an integer or \"auto\", not \"many\"");
  CHECK(error_of("workers = 2.5") ==
        "kiwi.toml:2:11: sensor.options.workers: expected an integer or \"auto\"");
  CHECK(error_of("workers = 65") == "kiwi.toml:2:11: sensor.options.workers: out of range: 1..64");
}

TEST_CASE("options: a default outside the row's choices is the plugin's error") {
  constexpr OptionSpec bad[] = {
      {"format", OptionType::string, "\"xml\"", "", false, 0, 0, "prometheus,json"}};
  const kiwi::PluginInfo info{kiwi::PluginKind::sensor, "bad", "", bad, kiwi::no_metrics};
  CHECK_THROWS_WITH(validate_options(info, nullptr, "kiwi.toml", "sensor"),
                    "plugin bad: option 'format' has an invalid default '\"xml\"' (expected one of "
                    "\"prometheus\" or \"json\", not \"xml\")");
}

TEST_CASE("options: a row's type as --describe-plugin and the docs write it, with its choices") {
  CHECK(option_type_text(kRows[0]) == "\"prometheus\" or \"json\"");
  CHECK(option_type_text(kRows[1]) == "integer or \"auto\"");
  CHECK(option_type_text(kRows[2]) == "string");
  const OptionSpec three{"level", OptionType::string, "\"info\"", "", false, 0, 0, "a,b,c"};
  CHECK(option_type_text(three) == "\"a\", \"b\" or \"c\"");
  CHECK(option_choices(three) == std::vector<std::string_view>{"a", "b", "c"});
  CHECK(option_choices(kRows[2]).empty());
}
