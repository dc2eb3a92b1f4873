// kiwi/views.hpp: every C view of kiwi/plugin.h and the C++ value it stands for, both ways. A
// value made into its view and read back is the value again; a view an older agent or plugin
// wrote (a smaller `size`, smaller rows) reads the defaults of what it does not have.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <kiwi/views.hpp>
#include <limits>
#include <string>
#include <vector>

#include "notice_support.hpp"

using namespace kiwi;

namespace {

using LabelList = std::vector<std::pair<std::string, std::string>>;

bool same_value(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

void check_same(const MetricValue& a, const MetricValue& b) {
  CHECK(a.name == b.name);
  CHECK(a.labels == b.labels);
  CHECK(same_value(a.value, b.value));
  CHECK(a.unit == b.unit);
  CHECK(a.kind == b.kind);
}

void check_same(const SensorReport& a, const SensorReport& b) {
  CHECK(a.name == b.name);
  CHECK(a.plugin == b.plugin);
  CHECK(a.state == b.state);
  CHECK(a.message == b.message);
  CHECK(a.timestamp == b.timestamp);
  CHECK(a.duration_seconds == b.duration_seconds);
  CHECK(a.errors_total == b.errors_total);
  CHECK(a.invalid_metrics_total == b.invalid_metrics_total);
  CHECK(a.series_refused_total == b.series_refused_total);
  REQUIRE(a.metrics.size() == b.metrics.size());
  for (std::size_t i = 0; i < a.metrics.size(); ++i) check_same(a.metrics[i], b.metrics[i]);
}

void check_same(const Snapshot& a, const Snapshot& b) {
  CHECK(a.sequence == b.sequence);
  CHECK(a.timestamp == b.timestamp);
  CHECK(a.interval_seconds == b.interval_seconds);
  CHECK(a.stale_after_seconds == b.stale_after_seconds);
  CHECK(a.host == b.host);
  CHECK(a.agent_version == b.agent_version);
  CHECK(a.started_at == b.started_at);
  REQUIRE(a.sensors.size() == b.sensors.size());
  for (std::size_t i = 0; i < a.sensors.size(); ++i) check_same(a.sensors[i], b.sensors[i]);
}

void check_same(const MetricSpec& a, const MetricSpec& b) {
  CHECK(a.name == b.name);
  CHECK(a.unit == b.unit);
  CHECK(a.kind == b.kind);
  CHECK(a.labels == b.labels);
  CHECK(a.help == b.help);
  CHECK(a.rate == b.rate);
}

void check_same(const OutputStatus& a, const OutputStatus& b) {
  CHECK(a.name == b.name);
  CHECK(a.plugin == b.plugin);
  CHECK(a.state == b.state);
  CHECK(a.interval_seconds == b.interval_seconds);
  CHECK(a.acked_at == b.acked_at);
  CHECK(a.seconds_behind == b.seconds_behind);
  CHECK(a.samples_pending == b.samples_pending);
  CHECK(a.samples_sent_total == b.samples_sent_total);
  CHECK(a.batches_sent_total == b.batches_sent_total);
  CHECK(a.batches_dropped_total == b.batches_dropped_total);
  CHECK(a.samples_dropped_total == b.samples_dropped_total);
  CHECK(a.failures_total == b.failures_total);
  CHECK(a.last_error == b.last_error);
  CHECK(a.last_error_at == b.last_error_at);
}

void check_same(const NotifierStatus& a, const NotifierStatus& b) {
  CHECK(a.name == b.name);
  CHECK(a.kind == b.kind);
  CHECK(a.state == b.state);
  CHECK(a.queued == b.queued);
  CHECK(a.sent_total == b.sent_total);
  CHECK(a.failures_total == b.failures_total);
  CHECK(a.dropped_total == b.dropped_total);
  CHECK(a.last_sent_at == b.last_sent_at);
  CHECK(a.last_error == b.last_error);
  CHECK(a.last_error_at == b.last_error_at);
}

void check_same(const Alert& a, const Alert& b) {
  CHECK(a.name == b.name);
  CHECK(a.labels == b.labels);
  CHECK(a.sensor == b.sensor);
  CHECK(a.series == b.series);
  CHECK(a.state == b.state);
  CHECK(a.severity == b.severity);
  CHECK(a.summary == b.summary);
  CHECK(same_value(a.value, b.value));
  CHECK(same_value(a.threshold, b.threshold));
  CHECK(a.since == b.since);
  CHECK(a.active_at == b.active_at);
}

// Everything of ABI 1.0's kiwi_stats (the members before `outputs`).
void check_same_1_0(const AgentStats& a, const AgentStats& b) {
  CHECK(a.version == b.version);
  CHECK(a.started_at == b.started_at);
  CHECK(a.ticks == b.ticks);
  CHECK(a.missed_ticks == b.missed_ticks);
  CHECK(a.store_write_errors == b.store_write_errors);
  CHECK(a.store_failing_writes == b.store_failing_writes);
  CHECK(a.store_last_error == b.store_last_error);
  CHECK(a.snapshot_file == b.snapshot_file);
  CHECK(a.snapshot_file_errors == b.snapshot_file_errors);
  CHECK(a.snapshot_file_failing == b.snapshot_file_failing);
  CHECK(a.snapshot_file_last_error == b.snapshot_file_last_error);
  REQUIRE(a.plugins.size() == b.plugins.size());
  for (std::size_t i = 0; i < a.plugins.size(); ++i) {
    const PluginStatus &p = a.plugins[i], &q = b.plugins[i];
    CHECK(p.name == q.name);
    CHECK(p.kind == q.kind);
    CHECK(p.plugin == q.plugin);
    CHECK(p.file == q.file);
    CHECK(p.abi_major == q.abi_major);
    CHECK(p.abi_minor == q.abi_minor);
    REQUIRE(p.metrics.size() == q.metrics.size());
    for (std::size_t j = 0; j < p.metrics.size(); ++j) check_same(p.metrics[j], q.metrics[j]);
  }
  REQUIRE(a.http_requests.size() == b.http_requests.size());
  for (std::size_t i = 0; i < a.http_requests.size(); ++i) {
    CHECK(a.http_requests[i].route == b.http_requests[i].route);
    CHECK(a.http_requests[i].status == b.http_requests[i].status);
    CHECK(a.http_requests[i].count == b.http_requests[i].count);
  }
  CHECK(a.config.generation == b.config.generation);
  CHECK(a.config.loaded_at == b.config.loaded_at);
  CHECK(a.config.source == b.config.source);
  CHECK(a.config.reload_status == b.config.reload_status);
  CHECK(a.config.reload_at == b.config.reload_at);
  CHECK(a.config.reload_message == b.config.reload_message);
  CHECK(a.config.reloads_ok == b.config.reloads_ok);
  CHECK(a.config.reloads_failed == b.config.reloads_failed);
}

void check_same(const AgentStats& a, const AgentStats& b) {
  check_same_1_0(a, b);
  REQUIRE(a.outputs.size() == b.outputs.size());
  for (std::size_t i = 0; i < a.outputs.size(); ++i) check_same(a.outputs[i], b.outputs[i]);
  CHECK(a.store_recovered == b.store_recovered);
  CHECK(a.store_samples_pending == b.store_samples_pending);
  CHECK(a.http_auth_failures == b.http_auth_failures);
  CHECK(a.http_auth_rate_limited == b.http_auth_rate_limited);
  CHECK(a.alerts_firing == b.alerts_firing);
  CHECK(a.alerts_pending == b.alerts_pending);
  REQUIRE(a.notifiers.size() == b.notifiers.size());
  for (std::size_t i = 0; i < a.notifiers.size(); ++i) check_same(a.notifiers[i], b.notifiers[i]);
}

// Every member set, none to its default, so a member the conversion forgets shows.
Snapshot full_snapshot() {
  Snapshot s;
  s.sequence = 42;
  s.timestamp = 1700000042.5;
  s.interval_seconds = 2;
  s.stale_after_seconds = 6;
  s.host = "kiwipi";
  s.agent_version = "0.3.0";
  s.started_at = 1699999000.25;
  SensorReport cpu;
  cpu.name = "cpu0";
  cpu.plugin = "cpu";
  cpu.state = SensorState::ok;
  cpu.message = "skipped core 7";
  cpu.timestamp = 1700000042.4;
  cpu.duration_seconds = 0.00025;
  cpu.errors_total = 1;
  cpu.invalid_metrics_total = 2;
  cpu.series_refused_total = 3;
  cpu.metrics = {
      {"cpu_usage_ratio", {}, 0.25, "ratio", MetricKind::gauge},
      {"cpu_seconds_total", {{"core", "0"}, {"mode", "user"}}, 1e9, "seconds", MetricKind::counter},
      {"odd", {{"path", "a \"b\"\n\\c"}}, -0.5, "", MetricKind::gauge},
      {"gone", {}, std::numeric_limits<double>::quiet_NaN(), "bytes", MetricKind::gauge}};
  for (std::string_view u : kUnits)
    cpu.metrics.push_back({"unit_" + std::string(u), {}, 1, std::string(u), MetricKind::gauge});
  SensorReport thermal;
  thermal.name = "thermal";
  thermal.plugin = "thermal";
  thermal.state = SensorState::no_data;
  thermal.message = "no zones";
  SensorReport broken;
  broken.name = "broken";
  broken.plugin = "exec";
  broken.state = SensorState::error;
  broken.message = "exit 1";
  broken.errors_total = 9;
  s.sensors = {cpu, thermal, broken};
  return s;
}

constexpr MetricSpec kCpuMetrics[] = {
    counter("cpu_seconds_total", Unit::seconds, "core, mode", "time per mode (/proc/stat)",
            "cpu_busy_ratio"),
    gauge("cpu_busy_ratio", Unit::ratio, "core, mode", "share of time per mode"),
    {"cpu_odd", static_cast<Unit>(77), static_cast<MetricKind>(5), "", "codes as given"}};

AgentStats full_stats() {
  AgentStats s;
  s.version = "0.3.0";
  s.started_at = 12.5;
  s.ticks = 40;
  s.missed_ticks = 1;
  s.store_write_errors = 3;
  s.store_failing_writes = 2;
  s.store_last_error = "disk full";
  s.store_recovered = "/var/lib/kiwi/history.db.corrupt-1";
  s.store_samples_pending = 77;
  s.snapshot_file = "/run/kiwi.json";
  s.snapshot_file_errors = 4;
  s.snapshot_file_failing = 5;
  s.snapshot_file_last_error = "read-only";
  s.plugins = {
      {"cpu0", PluginKind::sensor, "cpu", "/lib/kiwi-sensor-cpu.so", 1, 2, kCpuMetrics, {}},
      {"/api/x", PluginKind::handler, "x", "/lib/kiwi-handler-x.so", 1, 0, {}, {}},
      {"rw", PluginKind::output, "remote_write", "/lib/kiwi-output-rw.so", 1, 1, {}, {}}};
  s.http_requests = {{"/api/x", 200, 5}, {"unmatched", 404, 1}, {"/", 0, 2}};
  s.config.generation = 3;
  s.config.loaded_at = 100.5;
  s.config.source = "/etc/kiwi.toml";
  s.config.reload_status = "failed";
  s.config.reload_at = 101.5;
  s.config.reload_message = "bad key";
  s.config.reloads_ok = 2;
  s.config.reloads_failed = 1;
  OutputStatus o;
  o.name = "rw";
  o.plugin = "remote_write";
  o.state = "retrying";
  o.interval_seconds = 10;
  o.acked_at = 99.5;
  o.seconds_behind = 20.25;
  o.samples_pending = 6;
  o.samples_sent_total = 7;
  o.batches_sent_total = 8;
  o.batches_dropped_total = 9;
  o.samples_dropped_total = 10;
  o.failures_total = 11;
  o.last_error = "HTTP 503";
  o.last_error_at = 100.25;
  s.outputs = {o};
  s.http_auth_failures = 12;
  s.http_auth_rate_limited = 13;
  s.alerts_firing = 14;
  s.alerts_pending = 15;
  NotifierStatus am;
  am.name = "am";
  am.kind = "alertmanager";
  am.state = "retrying";
  am.queued = 16;
  am.sent_total = 17;
  am.failures_total = 18;
  am.dropped_total = 19;
  am.last_sent_at = 100.75;
  am.last_error = "HTTP 503 from http://127.0.0.1:9093/api/v2/alerts";
  am.last_error_at = 101.25;
  NotifierStatus phone;
  phone.name = "phone";
  phone.kind = "ntfy";
  phone.state = "idle";
  phone.sent_total = 20;
  s.notifiers = {am, phone};
  return s;
}

// Every member set, none to its default; one with no labels and no value (a status rule's).
std::vector<Alert> full_alerts() {
  Alert hot;
  hot.name = "soc_hot";
  hot.labels = {{"sensor", "soc-thermal"}, {"zone", "a \"b\"\n"}};
  hot.sensor = "thermal";
  hot.series = "thermal_celsius{sensor=\"soc-thermal\"}";
  hot.state = AlertState::firing;
  hot.severity = Severity::critical;
  hot.summary = "soc-thermal at 85.5 °C";
  hot.value = 85.5;
  hot.threshold = 80;
  hot.since = 1700000100.5;
  hot.active_at = 1700000040.25;
  Alert failing;
  failing.name = "sensor_failing";
  failing.sensor = "gpu";
  failing.series = "gpu";
  failing.state = AlertState::pending;
  failing.severity = Severity::info;
  failing.summary = "gpu: exit 1";
  failing.value = std::numeric_limits<double>::quiet_NaN();
  failing.threshold = std::numeric_limits<double>::quiet_NaN();
  failing.since = 1700000200;
  failing.active_at = 1700000200;
  Alert full = hot;
  full.name = "disk_full";
  full.state = AlertState::resolved;
  full.severity = Severity::warning;
  return {hot, failing, full};
}

// The rows of `rows` copied into rows of `row_size` bytes each (what a side of another minor
// version writes): a smaller size cuts each row, a larger one pads it with garbage the reader
// must not look at. Each row's own `size` member, if `set_size`, says the new size.
template <class Row>
std::vector<unsigned char> resized_rows(const Row* rows, std::size_t count, std::size_t row_size,
                                        bool set_size) {
  std::vector<unsigned char> out(count * row_size, 0xee);
  for (std::size_t i = 0; i < count; ++i) {
    Row copy = rows[i];
    if constexpr (requires { copy.size; })
      if (set_size) copy.size = static_cast<std::uint32_t>(row_size);
    std::memcpy(out.data() + i * row_size, &copy, std::min(row_size, sizeof copy));
  }
  return out;
}

}  // namespace

TEST_CASE("views: a snapshot made a C view and read back is the same snapshot") {
  const auto original = std::make_shared<const Snapshot>(full_snapshot());
  const abi::SnapshotView view(original);
  CHECK(view.c.size == sizeof(kiwi_snapshot));
  CHECK(view.c.sensor_report_size == sizeof(kiwi_sensor_report));
  auto back = abi::snapshot_from(view.c);
  check_same(*back, *original);

  SECTION("read into a snapshot filled before, of other sensors: nothing of it is left") {
    Snapshot reused = full_snapshot();
    reused.sensors[0].metrics.push_back({"extra", {{"a", "b"}}, 1, "bytes", MetricKind::gauge});
    reused.sensors.push_back(reused.sensors[0]);
    Snapshot smaller;
    smaller.sequence = 1;
    smaller.sensors = {full_snapshot().sensors[1]};
    const abi::SnapshotView small_view(std::make_shared<const Snapshot>(smaller));
    abi::assign_snapshot(reused, small_view.c);
    check_same(reused, smaller);
  }
}

TEST_CASE("views: sensor reports of ABI 1.1 read no refused series, larger rows read whole") {
  const auto original = std::make_shared<const Snapshot>(full_snapshot());
  const abi::SnapshotView view(original);
  Snapshot expected = *original;

  SECTION("rows of 1.1, before series_refused_total") {
    const std::size_t size_1_1 = offsetof(kiwi_sensor_report, series_refused_total);
    auto rows = resized_rows(view.sensors.data(), view.sensors.size(), size_1_1, true);
    kiwi_snapshot c = view.c;
    c.sensors = reinterpret_cast<const kiwi_sensor_report*>(rows.data());
    c.sensor_report_size = static_cast<std::uint32_t>(size_1_1);
    for (auto& r : expected.sensors) r.series_refused_total = 0;
    check_same(*abi::snapshot_from(c), expected);
  }
  SECTION("rows of a newer minor, with members this SDK does not know") {
    const std::size_t larger = sizeof(kiwi_sensor_report) + 24;
    auto rows = resized_rows(view.sensors.data(), view.sensors.size(), larger, true);
    kiwi_snapshot c = view.c;
    c.sensors = reinterpret_cast<const kiwi_sensor_report*>(rows.data());
    c.sensor_report_size = static_cast<std::uint32_t>(larger);
    check_same(*abi::snapshot_from(c), expected);
  }
}

TEST_CASE("views: the agent's counters made a C view and read back are the same counters") {
  const AgentStats original = full_stats();
  const abi::StatsView view(original);
  CHECK(view.c.size == sizeof(kiwi_stats));
  const AgentStats back = abi::stats_from(view.c);
  check_same(back, original);
  REQUIRE(back.plugins[0].metrics.size() == 3);
  CHECK(back.plugins[0].metrics[0].rate == "cpu_busy_ratio");
  CHECK(back.plugins[0].metrics.data() != kCpuMetrics);  // a copy, kept by `library`
  CHECK(back.plugins[0].library != nullptr);
  CHECK(back.plugins[1].metrics.empty());
}

TEST_CASE("views: counters of ABI 1.0, 1.1 and 1.5 read the defaults of what came later") {
  const AgentStats original = full_stats();
  const abi::StatsView view(original);

  SECTION("1.0: no outputs, no store or auth members") {
    kiwi_stats c = view.c;
    c.size = offsetof(kiwi_stats, outputs);
    const AgentStats back = abi::stats_from(c);
    check_same_1_0(back, original);
    CHECK(back.outputs.empty());
    CHECK(back.store_recovered.empty());
    CHECK(back.store_samples_pending == 0);
    CHECK(back.http_auth_failures == 0);
    CHECK(back.http_auth_rate_limited == 0);
    CHECK(back.alerts_firing == 0);
    CHECK(back.notifiers.empty());
  }
  SECTION("1.1: outputs, but not the store's and auth's members of 1.2") {
    kiwi_stats c = view.c;
    c.size = offsetof(kiwi_stats, store_recovered);
    const AgentStats back = abi::stats_from(c);
    check_same_1_0(back, original);
    REQUIRE(back.outputs.size() == 1);
    check_same(back.outputs[0], original.outputs[0]);
    CHECK(back.store_recovered.empty());
    CHECK(back.store_samples_pending == 0);
    CHECK(back.http_auth_failures == 0);
  }
  SECTION("1.5: everything before the alerts, no alert counts and no notifiers") {
    kiwi_stats c = view.c;
    c.size = offsetof(kiwi_stats, alerts_firing);
    AgentStats expected = original;
    expected.alerts_firing = expected.alerts_pending = 0;
    expected.notifiers.clear();
    check_same(abi::stats_from(c), expected);
  }
  SECTION("1.0 metric rows in a plugin's status: no rate") {
    auto rows =
        resized_rows(view.specs.data(), view.specs.size(), KIWI_METRIC_SPEC_SIZE_1_0, false);
    std::vector<kiwi_plugin_status> plugins = view.plugins;
    plugins[0].metrics = reinterpret_cast<const kiwi_metric_spec*>(rows.data());
    plugins[0].metric_spec_size = KIWI_METRIC_SPEC_SIZE_1_0;
    kiwi_stats c = view.c;
    c.plugins = plugins.data();
    const AgentStats back = abi::stats_from(c);
    REQUIRE(back.plugins[0].metrics.size() == 3);
    for (std::size_t i = 0; i < 3; ++i) {
      MetricSpec want = kCpuMetrics[i];
      want.rate = {};
      check_same(back.plugins[0].metrics[i], want);
    }
  }
}

TEST_CASE("views: notifier rows of a newer minor, larger than this SDK's, read whole") {
  const AgentStats original = full_stats();
  const abi::StatsView view(original);
  CHECK(view.c.notifier_status_size == sizeof(kiwi_notifier_status));
  const std::size_t larger = sizeof(kiwi_notifier_status) + 40;
  auto rows = resized_rows(view.notifiers.data(), view.notifiers.size(), larger, true);
  kiwi_stats c = view.c;
  c.notifiers = reinterpret_cast<const kiwi_notifier_status*>(rows.data());
  c.notifier_status_size = static_cast<std::uint32_t>(larger);
  check_same(abi::stats_from(c), original);
}

TEST_CASE("views: alert instances made a C view and read back are the same instances") {
  const std::vector<Alert> original = full_alerts();
  const abi::AlertsView view(original);
  CHECK(view.c.size == sizeof(kiwi_alert_list));
  CHECK(view.c.alert_size == sizeof(kiwi_alert));
  REQUIRE(view.c.count == 3);
  CHECK(view.rows[0].state == KIWI_ALERT_FIRING);
  CHECK(view.rows[0].severity == KIWI_SEVERITY_CRITICAL);
  CHECK(view.rows[1].label_count == 0);
  const std::vector<Alert> back = abi::alerts_from(view.c);
  REQUIRE(back.size() == original.size());
  for (std::size_t i = 0; i < back.size(); ++i) check_same(back[i], original[i]);
  CHECK(abi::alerts_from(abi::AlertsView({}).c).empty());

  SECTION("rows of a newer minor, with members this SDK does not know") {
    const std::size_t larger = sizeof(kiwi_alert) + 32;
    auto rows = resized_rows(view.rows.data(), view.rows.size(), larger, true);
    kiwi_alert_list c = view.c;
    c.alerts = reinterpret_cast<const kiwi_alert*>(rows.data());
    c.alert_size = static_cast<std::uint32_t>(larger);
    const std::vector<Alert> wide = abi::alerts_from(c);
    REQUIRE(wide.size() == original.size());
    for (std::size_t i = 0; i < wide.size(); ++i) check_same(wide[i], original[i]);
  }
  SECTION("a state or severity code of a newer minor reads as inactive, or warning") {
    std::vector<kiwi_alert> rows = view.rows;
    rows[0].state = KIWI_ALERT_RESOLVED + 1;
    rows[0].severity = KIWI_SEVERITY_CRITICAL + 1;
    kiwi_alert_list c = view.c;
    c.alerts = rows.data();
    const std::vector<Alert> back_codes = abi::alerts_from(c);
    CHECK(back_codes[0].state == AlertState::inactive);
    CHECK(back_codes[0].severity == Severity::warning);
    CHECK(back_codes[1].state == AlertState::pending);  // the others as they were
  }
}

TEST_CASE("views: a history query made a C view and read back is the same query") {
  HistoryQuery q;
  q.limit = 500;
  q.since = -12.5;
  q.patterns = {"cpu_*", "temp{zone=\"a\"}", ""};
  q.step = 60;
  q.aggregate = Aggregate::max;
  q.band = true;
  const abi::HistoryQueryView view(q);
  HistoryQuery back = abi::query_from(&view.c);
  CHECK(back.band);
  // From a plugin of 1.6, `band` is tail padding (its `size` covers it): never read.
  CHECK_FALSE(abi::query_from(&view.c, 6).band);
  CHECK(back.limit == q.limit);
  CHECK(back.since == q.since);
  CHECK_FALSE(back.until.has_value());
  CHECK(back.patterns == q.patterns);
  CHECK(back.step == q.step);
  CHECK(back.aggregate == q.aggregate);

  q.since.reset();
  q.until = 0;  // a bound at 0 is a bound, not none
  q.aggregate = Aggregate::last;
  q.band = false;
  const abi::HistoryQueryView other(q);
  back = abi::query_from(&other.c);
  CHECK_FALSE(back.since.has_value());
  CHECK(back.until == 0.0);
  CHECK(back.aggregate == Aggregate::last);
  CHECK_FALSE(back.band);

  kiwi_history_query bad = view.c;
  bad.aggregate = KIWI_AGGREGATE_LAST + 1;
  CHECK_THROWS_WITH(abi::query_from(&bad), "history query with unknown aggregate 4");
  bad = view.c;
  bad.size = offsetof(kiwi_history_query, aggregate);
  CHECK_THROWS_AS(abi::query_from(&bad), std::invalid_argument);
  bad.size = KIWI_HISTORY_QUERY_SIZE_1_0;  // 1.6's, without its padding (e.g. on i386): no band
  CHECK(abi::query_from(&bad).aggregate == Aggregate::max);
  CHECK_FALSE(abi::query_from(&bad).band);
  CHECK_THROWS_AS(abi::query_from(nullptr), std::invalid_argument);
}

TEST_CASE("views: a history result made a C view and read back is the same result") {
  HistoryResult r;
  r.timestamps = {1, 2, 3};
  r.series = {
      {"temp{zone=\"a\"}", "temp", {{"zone", "a"}}, "celsius", MetricKind::gauge, {20, NAN, 21}},
      {"rx_total", "rx_total", {}, "bytes", MetricKind::counter, {1, 2, 3}},
      {"x{a=\"1\",b=\"2\"}",
       "x",
       {{"a", "1"}, {"b", "2"}},
       "",
       MetricKind::gauge,
       {0, -0.0, 1e300}}};
  const abi::HistoryView view(r);
  const HistoryResult back = abi::history_from(view.c);
  CHECK(back.timestamps == r.timestamps);
  REQUIRE(back.series.size() == r.series.size());
  for (std::size_t i = 0; i < r.series.size(); ++i) {
    CHECK(back.series[i].key == r.series[i].key);
    CHECK(back.series[i].name == r.series[i].name);
    CHECK(back.series[i].labels == r.series[i].labels);
    CHECK(back.series[i].unit == r.series[i].unit);
    CHECK(back.series[i].kind == r.series[i].kind);
    REQUIRE(back.series[i].values.size() == r.timestamps.size());
    for (std::size_t j = 0; j < r.timestamps.size(); ++j)
      CHECK(same_value(back.series[i].values[j], r.series[i].values[j]));
  }
  CHECK(abi::history_from(abi::HistoryView(HistoryResult{}).c).series.empty());

  r.series[1].values.pop_back();  // the store promises one value per timestamp
  CHECK_THROWS_WITH(abi::HistoryView(r), "history series rx_total has 2 values for 3 timestamps");
}

TEST_CASE(
    "views: a history result's band (ABI 1.7) crosses whole, an older side's rows have none") {
  HistoryResult r;
  r.timestamps = {1, 2};
  r.series = {{"a", "a", {}, "ratio", MetricKind::gauge, {0.5, NAN}, {0.25, NAN}, {0.75, NAN}},
              {"b{x=\"1\"}", "b", {{"x", "1"}}, "", MetricKind::gauge, {1, 2}, {0, 1}, {3, 4}}};
  const abi::HistoryView view(r);
  CHECK(view.c.series_size == sizeof(kiwi_history_series));
  auto check_band = [&](const HistoryResult& back) {
    REQUIRE(back.series.size() == 2);
    for (std::size_t i = 0; i < 2; ++i) {
      CHECK(same_value(back.series[i].min[0], r.series[i].min[0]));
      CHECK(same_value(back.series[i].min[1], r.series[i].min[1]));
      CHECK(same_value(back.series[i].max[0], r.series[i].max[0]));
      CHECK(same_value(back.series[i].max[1], r.series[i].max[1]));
    }
  };
  check_band(abi::history_from(view.c));

  SECTION("rows of a newer minor, with members this SDK does not know") {
    const std::size_t larger = sizeof(kiwi_history_series) + 16;
    auto rows = resized_rows(view.series.data(), view.series.size(), larger, false);
    kiwi_history_result c = view.c;
    c.series = reinterpret_cast<const kiwi_history_series*>(rows.data());
    c.series_size = static_cast<std::uint32_t>(larger);
    const HistoryResult back = abi::history_from(c);
    check_band(back);
    CHECK(back.series[1].labels == r.series[1].labels);
  }
  SECTION("an agent of 1.6: a result without series_size, rows before min and max") {
    auto rows =
        resized_rows(view.series.data(), view.series.size(), KIWI_HISTORY_SERIES_SIZE_1_0, false);
    kiwi_history_result c = view.c;
    c.size = offsetof(kiwi_history_result, series_size);
    c.series_size = 0xeeeeeeee;  // not read: the size does not cover it
    c.series = reinterpret_cast<const kiwi_history_series*>(rows.data());
    const HistoryResult back = abi::history_from(c);
    REQUIRE(back.series.size() == 2);
    CHECK(back.series[1].key == r.series[1].key);
    CHECK(back.series[1].values == r.series[1].values);
    CHECK(back.series[0].min.empty());
    CHECK(back.series[1].max.empty());
  }
  SECTION("the rows the agent hands a plugin of 1.6: that size, whole up to it") {
    const abi::HistoryView old(r, KIWI_HISTORY_SERIES_SIZE_1_0);
    CHECK(old.c.series_size == KIWI_HISTORY_SERIES_SIZE_1_0);
    const auto& second = abi::row_at(old.c.series, KIWI_HISTORY_SERIES_SIZE_1_0, 1);
    CHECK(abi::view(second.key) == "b{x=\"1\"}");
    CHECK(second.values[1] == 2);
    const HistoryResult back = abi::history_from(old.c);
    CHECK(back.series[1].values == r.series[1].values);
    CHECK(back.series[1].min.empty());
  }
  SECTION("a band of another length than the values is refused") {
    r.series[1].max.pop_back();
    CHECK_THROWS_WITH(abi::HistoryView(r),
                      "history series b{x=\"1\"} has 2 min and 1 max for 2 values");
  }
}

TEST_CASE("views: series names made a C view and read back are the same names") {
  const std::vector<std::string> names = {"temp{zone=\"a\"}", "rx_total", ""};
  const abi::SeriesView view(names);
  CHECK(abi::names_from(view.c) == names);
  CHECK(abi::names_from(abi::SeriesView({}).c).empty());
}

TEST_CASE(
    "views: option rows and metric rows cross whole, and a row of ABI 1.0 has no choices nor "
    "rate") {
  constexpr OptionSpec kOptions[] = {
      {"interval", OptionType::duration, "\"10s\"", "how often", true, 100, 60000},
      {"names", OptionType::string_list, "[\"lo\"]", "which"},
      {"headers", OptionType::string_table, "{}", "extra headers"},
      {"format", OptionType::string, "\"prometheus\"", "what it prints", false, 0, 0,
       "prometheus|json"}};
  for (const OptionSpec& o : kOptions) {
    const kiwi_option_spec row = abi::option_row(o);
    const OptionSpec back = abi::option_spec_from(row, sizeof row);
    CHECK(back.choices == o.choices);
    CHECK(abi::option_spec_from(row, KIWI_OPTION_SPEC_SIZE_1_0).choices.empty());
    CHECK(back.key == o.key);
    CHECK(back.type == o.type);
    CHECK(back.default_toml == o.default_toml);
    CHECK(back.description == o.description);
    CHECK(back.has_range == o.has_range);
    CHECK(back.min == o.min);
    CHECK(back.max == o.max);
    CHECK(back.key.data() == o.key.data());  // a view of the plugin's table, not a copy
  }
  for (const MetricSpec& m : kCpuMetrics) {
    const kiwi_metric_spec row = abi::metric_row(m);
    check_same(abi::metric_spec_from(row, sizeof row), m);
    MetricSpec without_rate = m;
    without_rate.rate = {};
    check_same(abi::metric_spec_from(row, KIWI_METRIC_SPEC_SIZE_1_0), without_rate);
  }
}

TEST_CASE("views: option values of every type cross whole") {
  std::vector<OptionValue> values(8);
  values[0].key = "on";
  values[0].type = OptionType::boolean;
  values[0].boolean = true;
  values[1].key = "count";
  values[1].type = OptionType::integer;
  values[1].integer = -7;
  values[2].key = "scale";
  values[2].type = OptionType::number;
  values[2].number = 0.125;
  values[3].key = "path";
  values[3].type = OptionType::string;
  values[3].string = "/var/lib/kiwi";
  values[4].key = "names";
  values[4].type = OptionType::string_list;
  values[4].string_list = {"lo", "", "eth0"};
  values[5].key = "timeout";
  values[5].type = OptionType::duration;
  values[5].duration = std::chrono::milliseconds(1500);
  values[6].key = "cap";
  values[6].type = OptionType::size;
  values[6].size = 1ull << 40;
  values[7].key = "headers";
  values[7].type = OptionType::string_table;
  values[7].table = {{"X-Scope", "pi"}, {"b", ""}};
  const Options options(values);
  const abi::OptionValuesView view(options);
  REQUIRE(view.values.size() == 8);
  const Options back = abi::options_from(view.values.data(), view.values.size());
  REQUIRE(back.values().size() == 8);
  for (std::size_t i = 0; i < 8; ++i) {
    CHECK(back.values()[i].key == values[i].key);
    CHECK(back.values()[i].type == values[i].type);
  }
  CHECK(back.get_bool("on"));
  CHECK(back.get_int("count") == -7);
  CHECK(back.get_number("scale") == 0.125);
  CHECK(back.get_string("path") == "/var/lib/kiwi");
  CHECK(back.get_strings("names") == values[4].string_list);
  CHECK(back.get_duration("timeout") == std::chrono::milliseconds(1500));
  CHECK(back.get_size("cap") == (1ull << 40));
  CHECK(back.get_table("headers") == values[7].table);
}

namespace {

void check_same(const AlertNotice& a, const AlertNotice& b) {
  CHECK(a.name == b.name);
  CHECK(a.labels == b.labels);
  CHECK(a.sensor == b.sensor);
  CHECK(a.severity == b.severity);
  CHECK(a.firing == b.firing);
  CHECK(a.summary == b.summary);
  CHECK(same_value(a.value, b.value));
  CHECK(same_value(a.threshold, b.threshold));
  CHECK(a.starts_at == b.starts_at);
  CHECK(a.ends_at == b.ends_at);
  CHECK(a.sequence == b.sequence);
}

Notification full_notification() {
  Notification n = kiwi_notice_test::notification(
      {kiwi_notice_test::soc_hot(), kiwi_notice_test::sensor_failing_resolved()});
  n.alerts[0].labels = {{"zone", "soc"}, {"type", "cpu-thermal"}};
  n.repeat = true;
  return n;
}

}  // namespace

TEST_CASE("views: a notification made a C view and read back is the same notification") {
  const Notification original = full_notification();
  const abi::NotificationView view(original);
  CHECK(view.c.size == sizeof(kiwi_notification));
  CHECK(view.c.alert_size == sizeof(kiwi_alert_notice));
  CHECK(view.c.alerts[0].severity == KIWI_SEVERITY_WARNING);
  CHECK(view.c.alerts[1].severity == KIWI_SEVERITY_CRITICAL);
  CHECK(view.c.alerts[0].label_count == 2);
  CHECK(view.c.alerts[1].label_count == 0);
  const Notification back = abi::notification_from(view.c);
  CHECK(back.repeat == original.repeat);
  CHECK(back.host == original.host);
  CHECK(back.agent_url == original.agent_url);
  REQUIRE(back.alerts.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) check_same(back.alerts[i], original.alerts[i]);

  const Notification empty_back = abi::notification_from(abi::NotificationView(Notification{}).c);
  CHECK(empty_back.alerts.empty());
  CHECK(empty_back.host.empty());
  CHECK_FALSE(empty_back.repeat);
}

TEST_CASE("views: a notification of a later minor version, with larger rows, reads whole") {
  const Notification original = full_notification();
  const abi::NotificationView view(original);
  // An agent of a later minor version writes larger rows (members at their end): stepped through
  // by alert_size, each row's known members read, a later severity read as a warning.
  auto rows =
      resized_rows(view.alerts.data(), view.alerts.size(), sizeof(kiwi_alert_notice) + 24, true);
  reinterpret_cast<kiwi_alert_notice*>(rows.data() + sizeof(kiwi_alert_notice) + 24)->severity = 7;
  kiwi_notification c = view.c;
  c.alerts = reinterpret_cast<const kiwi_alert_notice*>(rows.data());
  c.alert_size = sizeof(kiwi_alert_notice) + 24;
  c.size = sizeof(kiwi_notification) + 16;
  const Notification back = abi::notification_from(c);
  REQUIRE(back.alerts.size() == 2);
  check_same(back.alerts[0], original.alerts[0]);
  CHECK(back.alerts[1].name == "sensor_failing");
  CHECK(back.alerts[1].severity == Severity::warning);
  CHECK(back.alerts[1].ends_at == 1700000125);
  CHECK(abi::severity_from(KIWI_SEVERITY_INFO) == Severity::info);
}

TEST_CASE("views: a notification smaller than ABI 1.6's is refused, not read past its end") {
  const Notification original = full_notification();  // the view points into it
  const abi::NotificationView view(original);
  kiwi_notification c = view.c;
  c.size = offsetof(kiwi_notification, agent_url);
  CHECK_THROWS_AS(abi::notification_from(c), std::invalid_argument);
  c = view.c;
  c.alert_size = offsetof(kiwi_alert_notice, sequence);
  CHECK_THROWS_WITH(
      abi::notification_from(c),
      Catch::Contains("alert rows of " + std::to_string(offsetof(kiwi_alert_notice, sequence))));
  c.alert_count = 0;  // no rows: their size does not matter
  CHECK_NOTHROW(abi::notification_from(c));
}
