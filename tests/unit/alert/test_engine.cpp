// The alert rule engine (alert/engine.hpp) on snapshots the test builds tick by tick, with a real
// store (SQLite file) for the state and the transitions it logs: fire after `for`, hysteresis,
// keep_firing_for, rates, thresholds from a series, status rules, a series that goes, reload, and a
// restart on the same file.
#include <catch2/catch.hpp>
#include <cmath>

#include "alert/engine.hpp"
#include "config/config.hpp"
#include "test_support.hpp"

using namespace kiwi;
using namespace kiwi::agent;

namespace {

constexpr double kT0 = 1'796'119'200;  // 2026-12-01T10:00:00Z

struct Sink final : MetricSink {
  void emit(const MetricSpec& m, std::span<const Label> labels, double value) override {
    std::string line(m.name);
    for (auto& l : labels) line += " " + std::string(l.name) + "=" + std::string(l.value);
    lines.push_back(line + " " + std::to_string(value));
  }
  std::vector<std::string> lines;
};

AlertRule rule(std::string name, std::string metric, double above) {
  AlertRule r;
  r.name = std::move(name);
  r.metric = std::move(metric);
  r.above = above;
  return r;
}

MetricValue metric(std::string name, double v,
                   std::vector<std::pair<std::string, std::string>> labels = {}) {
  MetricValue m;
  m.name = std::move(name);
  m.value = v;
  m.labels = std::move(labels);
  return m;
}

struct Bench {
  kiwi_test::TempDb db;
  kiwi_test::LogLines log;
  std::unique_ptr<Store> store = std::make_unique<Store>(db.path());
  std::unique_ptr<AlertEngine> engine = std::make_unique<AlertEngine>(*store, log);
  std::uint64_t sequence = 0;
  Sink last;

  // One tick at kT0 + t seconds with one report `sensor` holding `metrics`.
  void tick(double t, std::vector<MetricValue> metrics, std::string sensor = "thermal",
            SensorState state = SensorState::ok, double read_at = -1) {
    Snapshot s;
    s.sequence = ++sequence;
    s.timestamp = kT0 + t;
    s.stale_after_seconds = 3;
    SensorReport r;
    r.name = sensor;
    r.state = state;
    r.message = state == SensorState::error ? "cannot read /sys/x" : "";
    r.timestamp = read_at < 0 ? kT0 + t : kT0 + read_at;
    r.metrics = std::move(metrics);
    s.sensors.push_back(std::move(r));
    last = {};
    engine->sample(s, last);
  }
  std::vector<AlertNotice> events() {
    store->flush(0, 0);
    return store->alert_events_after(0, 1000);
  }
  AlertState state_of(const std::string& name) {
    for (auto& a : engine->alerts())
      if (a.name == name) return a.state;
    return AlertState::inactive;
  }
};

}  // namespace

TEST_CASE(
    "alerts: a value above the threshold is pending for `for`, then fires, and resolves once "
    "back below the hysteresis") {
  Bench b;
  AlertRule r = rule("soc_hot", "thermal_celsius", 80);
  r.hold_for = Millis(3000);
  r.hysteresis = 3.0;
  r.summary = "{{labels.sensor}} at {{value}} °C (limit {{threshold}})";
  b.engine->configure({r}, {});
  auto at = [&](double t, double v) {
    b.tick(t, {metric("thermal_celsius", v, {{"sensor", "soc"}})});
  };
  at(0, 70);
  CHECK(b.engine->alerts().empty());
  at(1, 81);
  CHECK(b.state_of("soc_hot") == AlertState::pending);
  at(2, 82);
  at(3, 83);
  CHECK(b.state_of("soc_hot") == AlertState::pending);  // held 2 s of 3
  at(4, 84);
  REQUIRE(b.state_of("soc_hot") == AlertState::firing);
  const Alert a = b.engine->alerts().at(0);
  CHECK(a.summary == "soc at 84.0 °C (limit 80.0)");
  CHECK(a.active_at == kT0 + 1);  // when it began to hold
  CHECK(a.since == kT0 + 4);
  CHECK(a.sensor == "thermal");
  CHECK(a.series == "thermal_celsius{sensor=\"soc\"}");
  CHECK(b.last.lines == std::vector<std::string>{"alert_firing alertname=soc_hot "
                                                 "severity=warning sensor=soc 1.000000"});
  at(5, 78);  // below the threshold, not below 77
  CHECK(b.state_of("soc_hot") == AlertState::firing);
  at(6, 77);
  CHECK(b.state_of("soc_hot") == AlertState::resolved);
  CHECK(b.last.lines.empty());
  auto ev = b.events();
  REQUIRE(ev.size() == 2);
  CHECK(ev[0].firing);
  CHECK(ev[0].starts_at == kT0 + 1);
  CHECK_FALSE(ev[1].firing);
  CHECK(ev[1].ends_at == kT0 + 6);
  CHECK(ev[1].sequence == ev[0].sequence + 1);
}

TEST_CASE("alerts: a value hovering at the threshold fires once and does not flap") {
  Bench b;
  AlertRule r = rule("hot", "thermal_celsius", 80);  // default hysteresis: 5 % of 80 = 4
  b.engine->configure({r}, {});
  const double values[] = {79.9, 80.1, 79.8, 80.2, 79.7, 80.05, 79.95, 80.3, 79.5, 80.1, 76.1};
  double t = 0;
  for (double v : values) b.tick(t++, {metric("thermal_celsius", v)});
  CHECK(b.state_of("hot") == AlertState::firing);
  CHECK(b.events().size() == 1);
  b.tick(t++, {metric("thermal_celsius", 75.9)});  // 80 - 4 = 76: cleared
  CHECK(b.state_of("hot") == AlertState::resolved);
  CHECK(b.events().size() == 2);
}

TEST_CASE("alerts: a board's own limit from a threshold series, else the rule's number") {
  Bench b;
  AlertRule r = rule("soc_hot", "thermal_celsius", 80);
  r.threshold_series = "thermal_critical_celsius";
  r.threshold_offset = -5;
  b.engine->configure({r}, {});
  b.tick(0, {metric("thermal_celsius", 72, {{"sensor", "a"}}),
             metric("thermal_critical_celsius", 75, {{"sensor", "a"}}),  // limit 70 here
             metric("thermal_celsius", 72, {{"sensor", "b"}})});         // no crit: 80
  auto alerts = b.engine->alerts();
  REQUIRE(alerts.size() == 1);
  CHECK(alerts[0].labels == std::vector<std::pair<std::string, std::string>>{{"sensor", "a"}});
  CHECK(alerts[0].threshold == 70);
  CHECK(alerts[0].state == AlertState::firing);
}

TEST_CASE("alerts: a counter's rate fires on growth and keep_firing_for holds it") {
  Bench b;
  AlertRule r = rule("oom_kill", "vm_oom_kills_total", 0);
  r.rate = true;
  r.keep_firing_for = Millis(300'000);
  b.engine->configure({r}, {});
  b.tick(0, {metric("vm_oom_kills_total", 4)}, "memory");
  CHECK(b.engine->alerts().empty());  // the first reading has no rate
  b.tick(1, {metric("vm_oom_kills_total", 4)}, "memory");
  CHECK(b.engine->alerts().empty());
  b.tick(2, {metric("vm_oom_kills_total", 5)}, "memory");
  CHECK(b.state_of("oom_kill") == AlertState::firing);
  for (int t = 3; t < 302; ++t) b.tick(t, {metric("vm_oom_kills_total", 5)}, "memory");
  CHECK(b.state_of("oom_kill") == AlertState::firing);  // 299 s of 300 cleared
  b.tick(303, {metric("vm_oom_kills_total", 5)}, "memory");
  CHECK(b.state_of("oom_kill") == AlertState::resolved);
  CHECK(b.events().size() == 2);
}

TEST_CASE("alerts: a status rule fires for a sensor failing for its `for`, with its message") {
  Bench b;
  AlertRule r;
  r.name = "sensor_failing";
  r.status = "failing";
  r.hold_for = Millis(60'000);
  r.summary = "sensor {{sensor}} failed: {{message}}";
  b.engine->configure({r}, {});
  for (int t = 0; t < 60; ++t) b.tick(t, {}, "disk", SensorState::error);
  CHECK(b.state_of("sensor_failing") == AlertState::pending);
  b.tick(60, {}, "disk", SensorState::error);
  REQUIRE(b.state_of("sensor_failing") == AlertState::firing);
  CHECK(b.engine->alerts()[0].summary == "sensor disk failed: cannot read /sys/x");
  CHECK(b.last.lines == std::vector<std::string>{"alert_firing alertname=sensor_failing "
                                                 "severity=warning sensor=disk 1.000000"});
  b.tick(61, {}, "disk", SensorState::ok);
  CHECK(b.state_of("sensor_failing") == AlertState::resolved);
}

TEST_CASE("alerts: a stale rule fires for a sensor without a reading for stale_after") {
  Bench b;
  AlertRule r;
  r.name = "stale";
  r.status = "stale";
  b.engine->configure({r}, {});
  b.tick(10, {}, "exec", SensorState::ok, 8);
  CHECK(b.engine->alerts().empty());
  b.tick(12, {}, "exec", SensorState::ok, 8);  // 4 s old, stale after 3
  CHECK(b.state_of("stale") == AlertState::firing);
}

TEST_CASE(
    "alerts: labels and sensor globs choose the series, and a firing series that goes resolves") {
  Bench b;
  AlertRule r = rule("full", "storage_used_ratio", 0.9);
  r.labels = {{"mount", "/mnt*"}};
  r.sensor = "stor*";
  b.engine->configure({r}, {});
  b.tick(0,
         {metric("storage_used_ratio", 0.95, {{"mount", "/"}}),
          metric("storage_used_ratio", 0.95, {{"mount", "/mnt/usb"}})},
         "storage");
  auto alerts = b.engine->alerts();
  REQUIRE(alerts.size() == 1);
  CHECK(alerts[0].labels[0].second == "/mnt/usb");
  b.tick(1, {metric("storage_used_ratio", 0.95, {{"mount", "/"}})}, "storage");
  CHECK(b.state_of("full") == AlertState::resolved);
  b.tick(2, {metric("storage_used_ratio", 0.95, {{"mount", "/mnt/usb"}})}, "other");
  CHECK(b.state_of("full") == AlertState::resolved);  // another sensor: not matched
}

TEST_CASE(
    "alerts: a restart on the same file keeps a firing alert and its start, and logs "
    "nothing new") {
  Bench b;
  AlertRule r = rule("hot", "thermal_celsius", 80);
  b.engine->configure({r}, {});
  b.tick(0, {metric("thermal_celsius", 90)});
  b.tick(1, {metric("thermal_celsius", 90)});
  REQUIRE(b.events().size() == 1);  // flushed: state and event in the file
  b.engine.reset();
  b.store.reset();
  b.store = std::make_unique<Store>(b.db.path());
  b.engine = std::make_unique<AlertEngine>(*b.store, b.log);
  b.engine->configure({r}, {});
  auto alerts = b.engine->alerts();
  b.tick(30, {metric("thermal_celsius", 91)});
  alerts = b.engine->alerts();
  REQUIRE(alerts.size() == 1);
  CHECK(alerts[0].state == AlertState::firing);
  CHECK(alerts[0].active_at == kT0);
  CHECK(alerts[0].since == kT0);
  CHECK(b.events().size() == 1);
  b.tick(31, {metric("thermal_celsius", 50)});
  CHECK(b.events().size() == 2);
}

TEST_CASE(
    "alerts: a reload keeps the instances of a rule that stays, and a disabled rule's firing "
    "instance is logged resolved") {
  Bench b;
  AlertRule hot = rule("hot", "thermal_celsius", 80), warm = rule("warm", "thermal_celsius", 60);
  b.engine->configure({hot, warm}, {});
  b.tick(0, {metric("thermal_celsius", 90)});
  CHECK(b.engine->alerts().size() == 2);
  b.engine->configure({hot, warm}, {"warm"});
  b.tick(1, {metric("thermal_celsius", 90)});
  auto alerts = b.engine->alerts();
  REQUIRE(alerts.size() == 1);
  CHECK(alerts[0].name == "hot");
  CHECK(alerts[0].since == kT0);  // kept
  auto ev = b.events();
  REQUIRE(ev.size() == 3);
  CHECK(ev[2].name == "warm");
  CHECK_FALSE(ev[2].firing);
}

TEST_CASE("alerts: values in a summary have three significant digits") {
  CHECK(AlertEngine::format_value(47.722) == "47.7");
  CHECK(AlertEngine::format_value(0.93125) == "0.931");
  CHECK(AlertEngine::format_value(512.4) == "512");
  CHECK(AlertEngine::format_value(3392172032) == "3392172032");
  CHECK(AlertEngine::format_value(std::nan("")) == "n/a");
  Alert a;
  a.name = "full";
  a.value = 0.934;
  a.threshold = 0.9;
  a.labels = {{"mount", "/"}};
  CHECK(AlertEngine::render("{{labels.mount}} is {{value_percent}} % full (over "
                            "{{threshold_percent}} %), {{labels.none}}.",
                            a, "") == "/ is 93.4 % full (over 90.0 %), .");
}

TEST_CASE(
    "alerts: the built-in clock_unsynchronised fires after 10 minutes of an unsynchronised "
    "clock and resolves once it is synchronised") {
  // The clock sensor reads a system call, which no fixture drives: its rule is checked here, as
  // the default configuration declares it, on the values the sensor emits (0 or 1).
  Bench b;
  const Config defaults = load_config_text("", "kiwi.toml", "/opt/kiwi/bin");
  std::vector<AlertRule> rules;
  for (const AlertRule& r : defaults.alert_rules)
    if (r.name == "clock_unsynchronised") rules.push_back(r);
  REQUIRE(rules.size() == 1);
  b.engine->configure(rules, {});
  auto at = [&](double t, double synchronized) {
    b.tick(t, {metric("clock_synchronized", synchronized), metric("clock_max_error_seconds", 16)},
           "clock");
  };
  at(0, 1);
  CHECK(b.engine->alerts().empty());
  at(1, 0);  // a board that lost its time server, or booted without network
  CHECK(b.state_of("clock_unsynchronised") == AlertState::pending);
  at(600, 0);
  CHECK(b.state_of("clock_unsynchronised") == AlertState::pending);  // 599 s of 600
  at(601, 0);
  REQUIRE(b.state_of("clock_unsynchronised") == AlertState::firing);
  const Alert a = b.engine->alerts().at(0);
  CHECK(a.severity == Severity::warning);
  CHECK(a.sensor == "clock");
  CHECK(a.summary ==
        "the clock is not synchronised (no time server reached); timestamps may be wrong");
  at(602, 1);
  CHECK(b.state_of("clock_unsynchronised") == AlertState::resolved);
}

TEST_CASE("alerts: a series that appears later, or moves within its report, is found") {
  Bench b;
  b.engine->configure({rule("full", "storage_used_ratio", 0.9)}, {});
  b.tick(0, {metric("storage_size_bytes", 1, {{"mount", "/"}})}, "storage");
  CHECK(b.engine->alerts().empty());
  b.tick(1,
         {metric("storage_size_bytes", 1, {{"mount", "/"}}),
          metric("storage_used_ratio", 0.95, {{"mount", "/"}})},
         "storage");
  CHECK(b.state_of("full") == AlertState::firing);
  // Same layout of names, another value: still the same series.
  b.tick(2,
         {metric("storage_size_bytes", 1, {{"mount", "/"}}),
          metric("storage_used_ratio", 0.5, {{"mount", "/"}})},
         "storage");
  CHECK(b.state_of("full") == AlertState::resolved);
  // Moved to the front of its report.
  b.tick(3,
         {metric("storage_used_ratio", 0.97, {{"mount", "/"}}),
          metric("storage_size_bytes", 1, {{"mount", "/"}})},
         "storage");
  CHECK(b.state_of("full") == AlertState::firing);
  CHECK(b.events().size() == 3);
}
