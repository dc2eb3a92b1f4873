// [[alert]], [alerts] and [[notify]] as the configuration reads them: the built-in rules, a user's
// rules added to them or replacing one by name, and each mistake named at its file:line:col.
#include <catch2/catch.hpp>

#include "config/alert_rule.hpp"
#include "config/config.hpp"
#include "config/schema.hpp"

using namespace kiwi::agent;

namespace {
Config load(const std::string& text) {
  return load_config_text(text, "kiwi.toml", "/opt/kiwi/bin");
}
std::string error_of(const std::string& text) {
  try {
    load(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}
const AlertRule* find(const Config& c, const std::string& name) {
  for (auto& r : c.alert_rules)
    if (r.name == name) return &r;
  return nullptr;
}
}  // namespace

TEST_CASE("alert config: the built-in rules, each switchable off by name") {
  Config c = load("");
  std::vector<std::string> names;
  for (auto& r : c.alert_rules) names.push_back(r.name);
  CHECK(names == std::vector<std::string>{"soc_hot", "under_voltage", "throttled",
                                          "filesystem_full", "memory_low", "oom_kill",
                                          "sensor_failing", "history_write_failing",
                                          "clock_unsynchronised"});
  const AlertRule& hot = *find(c, "soc_hot");
  CHECK(hot.above == 80.0);
  CHECK(hot.threshold_series == "thermal_critical_celsius");
  CHECK(hot.threshold_offset == -5.0);
  CHECK(hot.hold_for == Millis(30'000));
  CHECK(hot.severity == "critical");
  CHECK(find(c, "sensor_failing")->status == "failing");
  const AlertRule& clock = *find(c, "clock_unsynchronised");
  CHECK(clock.metric == "clock_synchronized");
  CHECK(clock.below == 0.5);
  CHECK_FALSE(clock.above);
  CHECK(clock.hold_for == Millis(600'000));
  CHECK(clock.severity == "warning");
  CHECK(clock.summary.find("{{") == std::string::npos);  // {{value}} would be the 0
  CHECK(c.alerts.disable.empty());
  Config off = load("[alerts]\ndisable = [\"memory_low\", \"throttled\"]\n");
  CHECK(off.alerts.disable == std::vector<std::string>{"memory_low", "throttled"});
  CHECK(error_of("[alerts]\ndisable = [\"memroy_low\"]\n")
            .starts_with("kiwi.toml:2:11: alerts.disable: \"memroy_low\" names no [[alert]] rule; "
                         "the rules: soc_hot, under_voltage"));
}

TEST_CASE(
    "alert config: a user's rule adds to the built-in ones, and one of the same name replaces "
    "it in place") {
  Config c = load(R"(
[[alert]]
name = "memory_low"
metric = "memory_used_ratio"
above = 0.8
[[alert]]
name = "nvme_hot"
metric = "thermal_celsius"
labels = { sensor = "nvme*" }
above = 70
for = "2m"
severity = "critical"
summary = "{{labels.sensor}} at {{value}} °C"
)");
  REQUIRE(c.alert_rules.size() == 10);
  CHECK(c.alert_rules[4].name == "memory_low");
  CHECK(c.alert_rules[4].above == 0.8);
  CHECK(c.alert_rules[4].hold_for == Millis(0));  // the user's rule whole, not merged
  CHECK(c.alert_rules[4].pos.str() == "kiwi.toml:2:1");
  const AlertRule& nvme = c.alert_rules.back();
  CHECK(nvme.labels == std::map<std::string, std::string>{{"sensor", "nvme*"}});
  CHECK(nvme.above == 70.0);
  CHECK(nvme.hold_for == Millis(120'000));
}

TEST_CASE("alert config: each mistake is named at its place with what is accepted") {
  CHECK(error_of("[[alert]]\nmetric = \"x\"\nabove = 1\n") ==
        "kiwi.toml:1:1: alert.name: missing; name the rule, e.g. name = \"soc_hot\"");
  CHECK(error_of("[[alert]]\nname = \"a\"\nabove = 1\n")
            .starts_with("kiwi.toml:1:1: alert.metric: missing; name the series"));
  CHECK(error_of("[[alert]]\nname = \"a\"\nmetric = \"x\"\n") ==
        "kiwi.toml:1:1: alert.above: missing; give the threshold, e.g. above = 80.0 or below = "
        "0.05");
  CHECK(error_of("[[alert]]\nname = \"a\"\nmetric = \"x\"\nabove = 1\nbelow = 0\n") ==
        "kiwi.toml:5:9: alert.below: give above or below, not both (one rule, one threshold)");
  CHECK(error_of("[[alert]]\nname = \"a\"\nstatus = \"failing\"\nmetric = \"x\"\n")
            .starts_with("kiwi.toml:4:10: alert.metric: a status rule (status = \"failing\") "
                         "watches a sensor"));
  CHECK(error_of("[[alert]]\nname = \"a\"\nstatus = \"broken\"\n")
            .starts_with("kiwi.toml:3:10: alert.status: \"broken\" is not a sensor status"));
  CHECK(error_of("[[alert]]\nname = \"a\"\nmetric = \"x\"\nabove = 1\nsummary = \"{{vlaue}}\"\n")
            .starts_with("kiwi.toml:5:11: alert.summary: unknown placeholder {{vlaue}}; accepted: "
                         "{{value}}"));
  CHECK(error_of("[[alert]]\nname = \"a\"\nmetric = \"x\"\nabove = 1\nseverity = \"high\"\n")
            .starts_with("kiwi.toml:5:12: alert.severity: \"high\" is not a severity"));
  CHECK(error_of("[[alert]]\nname = \"a\"\nmetric = \"x\"\nabove = \"80\"\n")
            .starts_with("kiwi.toml:4:9: alert.above:"));
  CHECK(error_of("[[alert]]\nname = \"a\"\nmetric = \"x\"\nabove = 1\nfor = 60\n")
            .starts_with("kiwi.toml:5:7: alert.for:"));
  CHECK(error_of("[[alert]]\nname = \"a\"\nmetric = \"x\"\nabove = 1\nthreshold = 3\n")
            .starts_with("kiwi.toml:5:1: alert.threshold: unknown key; accepted here: name, "
                         "metric, labels"));
  CHECK(error_of("[[alert]]\nname = \"a\"\nmetric = \"x\"\nabove = 1\n[[alert]]\nname = "
                 "\"a\"\nmetric = \"y\"\nbelow = 1\n") ==
        "kiwi.toml:5:1: alert.name: \"a\" names two [[alert]] rules (the other at "
        "kiwi.toml:1:1); give each a unique name");
  CHECK(error_of("[[sensor]]\nplugin = \"cpu\"\nname = \"alerts\"\n")
            .starts_with("kiwi.toml:1:1: sensor.name: \"alerts\" is the name of one of the "
                         "agent's own reports"));
}

TEST_CASE(
    "alert config: a [[notify]] takes its kind, the agent's keys and its plugin's options "
    "flat") {
  Config c = load(R"(
[[notify]]
kind = "ntfy"
url = "https://ntfy.sh/barn"
min_severity = "warning"
alerts = ["soc_*", "under_voltage"]
[[notify]]
kind = "alertmanager"
name = "am"
repeat_interval = "2m"
options = { url = "http://127.0.0.1:9093" }
)");
  REQUIRE(c.notifiers.size() == 2);
  CHECK(c.notifiers[0].plugin == "ntfy");
  CHECK(c.notifiers[0].name == "ntfy");
  CHECK(c.notifiers[0].min_severity == "warning");
  CHECK(c.notifiers[0].alerts == std::vector<std::string>{"soc_*", "under_voltage"});
  CHECK_FALSE(c.notifiers[0].repeat_interval);
  CHECK(c.notifiers[0].options_flat);
  CHECK(c.warnings.empty());  // the flat shape is [[notify]]'s own
  CHECK(c.notifiers[1].name == "am");
  CHECK(c.notifiers[1].repeat_interval == Millis(120'000));
  CHECK(error_of("[[notify]]\nurl = \"x\"\n") ==
        "kiwi.toml:1:1: notify.kind: missing; e.g. kind = \"ntfy\" (or \"alertmanager\", "
        "\"webhook\")");
  CHECK(error_of("[[notify]]\nkind = \"ntfy\"\n[[notify]]\nkind = \"ntfy\"\n")
            .starts_with("kiwi.toml:3:1: notify.name: \"ntfy\" is used by two [[notify]] entries"));
}

TEST_CASE(
    "alert config: --print-config writes the rules and notifiers so that they load again "
    "the same") {
  Config c = load(R"(
[alerts]
disable = ["throttled"]
[[alert]]
name = "nvme_hot"
metric = "thermal_celsius"
labels = { sensor = "nvme*" }
above = 70
rate = false
hysteresis = 2.5
summary = "{{labels.sensor}} at {{value}} °C"
[[notify]]
kind = "webhook"
options = { url = "http://127.0.0.1:1/hook" }
)");
  const std::string text = render_toml(c);
  Config again = load(text);
  CHECK(again.alert_rules == c.alert_rules);
  CHECK(again.alerts.disable == c.alerts.disable);
  REQUIRE(again.notifiers.size() == 1);
  CHECK(again.notifiers[0].plugin == "webhook");
}

TEST_CASE("alert config: a summary template in pieces") {
  auto parsed = parse_template("{{labels.zone}} at {{ value }} °C");
  auto& pieces = std::get<std::vector<TemplatePiece>>(parsed);
  REQUIRE(pieces.size() == 4);
  CHECK(pieces[0].placeholder);
  CHECK(pieces[0].text == "labels.zone");
  CHECK(pieces[1].text == " at ");
  CHECK(pieces[2].text == "value");
  CHECK(std::get<std::string>(parse_template("{{value")) ==
        "\"{{\" at character 1 is not closed with \"}}\"");
}
