// The agent's own report (app/telemetry.cpp): made of MetricSpec rows and checked as a sensor's
// is, rendered by /metrics as today's self-metrics, and listed in docs/api.md.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "app/telemetry.hpp"
#include "metrics_render.hpp"
#include "plugin/metric_check.hpp"
#include "test_support.hpp"

using namespace kiwi::agent;
namespace fs = std::filesystem;

namespace {

// A board tree without proc/self/io: no bytes-written series.
constexpr const char* kProcfs = KIWI_FIXTURES_DIR "/rk3588/proc";

// A tick's sensor reports, as the collector hands them to the agent's report.
kiwi::Snapshot tick() {
  kiwi::Snapshot s;
  s.sequence = 3;
  s.timestamp = 1764475800;
  kiwi::SensorReport ok;
  ok.name = "thermal";
  ok.plugin = "thermal";
  ok.duration_seconds = 0.00025;
  kiwi::SensorReport bad;
  bad.name = "gpu";
  bad.plugin = "gpu";
  bad.state = kiwi::SensorState::error;
  bad.errors_total = 3;
  bad.series_refused_total = 2;
  s.sensors = {ok, bad};
  return s;
}

// The agent's report of `snap`, read through the metric check as the collector reads it, with
// `procfs` as agent.procfs.
SampleCall read_report(const AgentData& data, const kiwi::Snapshot& snap,
                       const std::string& procfs = kProcfs) {
  Telemetry telemetry(data, procfs);
  return call_checked([&](kiwi::MetricSink& sink) { return telemetry.sample(snap, sink); },
                      nullptr);
}

// The /metrics text of a tick with the agent's report of `data` in it, its rows as the plugin's.
std::string metrics_text(const AgentData& data) {
  kiwi::Snapshot snap = tick();
  kiwi::SensorReport own;
  own.name = own.plugin = std::string(kiwi::kAgentReport);
  own.metrics = read_report(data, snap).metrics;
  snap.sensors.push_back(own);
  kiwi::AgentStats stats;
  stats.plugins.push_back({own.name, kiwi::PluginKind::sensor, own.plugin, "", KIWI_ABI_MAJOR,
                           KIWI_ABI_MINOR, Telemetry::rows(), nullptr});
  return kiwi_metrics::render(snap, stats);
}

double value_of(const SampleCall& c, const std::string& name,
                const std::vector<std::pair<std::string, std::string>>& labels = {}) {
  for (auto& m : c.metrics)
    if (m.name == name && m.labels == labels) return m.value;
  FAIL("no " << name << " in the agent's report");
  return 0;
}

}  // namespace

TEST_CASE("telemetry: the agent's report passes the metric check, each metric a row of its own") {
  SnapshotHolder holder;
  AgentData data(holder, nullptr);
  data.started_at = 1764470000.75;
  const SampleCall c = read_report(data, tick());
  INFO(c.message << c.dropped_note);
  CHECK(c.state == kiwi::SensorState::ok);
  CHECK(c.dropped == 0);
  std::set<std::string_view> rows;
  for (auto& row : Telemetry::rows()) CHECK(rows.insert(row.name).second);  // unique names
  for (auto& m : c.metrics) CHECK(rows.contains(m.name));
  const std::string abi = std::to_string(KIWI_ABI_MAJOR) + "." + std::to_string(KIWI_ABI_MINOR);
  CHECK(value_of(c, "build_info", {{"version", KIWI_VERSION}, {"abi", abi}}) == 1);
  CHECK(value_of(c, "start_time_seconds") == 1764470000);
  CHECK(value_of(c, "last_sample_timestamp_seconds") == 1764475800);
  // One series per sensor of the tick, by its name.
  CHECK(value_of(c, "sensor_success", {{"sensor", "thermal"}}) == 1);
  CHECK(value_of(c, "sensor_success", {{"sensor", "gpu"}}) == 0);
  CHECK(value_of(c, "sensor_errors_total", {{"sensor", "gpu"}}) == 3);
  CHECK(value_of(c, "sensor_series_refused_total", {{"sensor", "gpu"}}) == 2);
  CHECK(value_of(c, "sensor_sample_duration_seconds", {{"sensor", "thermal"}}) == 0.00025);
  CHECK(value_of(c, "config_generation") == 1);
  CHECK(value_of(c, "config_reloads_total", {{"result", "failed"}}) == 0);
  CHECK(value_of(c, "http_auth_failures_total", {{"reason", "rate_limited"}}) == 0);
}

TEST_CASE(
    "telemetry: /metrics renders the agent's report as the self-metrics, HELP from its rows") {
  SnapshotHolder holder;
  AgentData data(holder, nullptr);
  const std::string text = metrics_text(data);
  CHECK_THAT(text, Catch::StartsWith("# HELP kiwi_build_info kiwi-agent version and plugin ABI; "
                                     "always 1\n# TYPE kiwi_build_info gauge\n"));
  CHECK_THAT(text, Catch::Contains("# HELP kiwi_sensor_success 1 if the sensor's latest sample "
                                   "succeeded (ok or no data), 0 if it failed\n"
                                   "# TYPE kiwi_sensor_success gauge\n"
                                   "kiwi_sensor_success{sensor=\"thermal\"} 1\n"
                                   "kiwi_sensor_success{sensor=\"gpu\"} 0\n"));
  CHECK_THAT(text, Catch::Contains("# TYPE kiwi_collector_ticks_total counter\n"));
  CHECK_THAT(text, Catch::Contains("kiwi_config_reloads_total{result=\"ok\"} 0\n"
                                   "kiwi_config_reloads_total{result=\"failed\"} 0\n"));
  // The families in the order of the rows: the order /metrics has always had.
  std::vector<std::string> families;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with("# TYPE ")) families.push_back(line.substr(7, line.rfind(' ') - 7));
  std::vector<std::string> rows;
  for (auto& row : Telemetry::rows())
    if (std::find(families.begin(), families.end(), "kiwi_" + std::string(row.name)) !=
        families.end())
      rows.push_back("kiwi_" + std::string(row.name));
  CHECK(families == rows);
}

TEST_CASE(
    "telemetry: the agent's bytes written are write_bytes of <procfs>/self/io, absent when "
    "that cannot be read") {
  SnapshotHolder holder;
  AgentData data(holder, nullptr);
  // The vm board's proc/self/io is a kiwi-agent's own, read on a VM (tests/fixtures/vm/README.md):
  // write_bytes 1036288, where wchar (880813) counts what it handed to write() and
  // cancelled_write_bytes what it truncated before writeback.
  const SampleCall c = read_report(data, tick(), KIWI_FIXTURES_DIR "/vm/proc");
  INFO(c.message << c.dropped_note);
  CHECK(c.dropped == 0);
  CHECK(value_of(c, "agent_disk_written_bytes_total") == 1036288);

  // No such file (a kernel without CONFIG_TASK_IO_ACCOUNTING), a file whose read() fails (a
  // hardened /proc: here a directory, EISDIR), a file without the line: the report is ok and
  // holds every other series, only this one is left out.
  kiwi_test::TempDir tmp;
  fs::create_directories(tmp.path / "unreadable/self/io");
  fs::create_directories(tmp.path / "no_line/self");
  std::ofstream(tmp.path / "no_line/self/io") << "rchar: 1863930\nwchar: 880813\n";
  for (const std::string& procfs : {std::string(kProcfs), (tmp.path / "unreadable").string(),
                                    (tmp.path / "no_line").string()}) {
    INFO(procfs);
    const SampleCall r = read_report(data, tick(), procfs);
    CHECK(r.state == kiwi::SensorState::ok);
    CHECK(value_of(r, "collector_ticks_total") == 0);
    for (auto& m : r.metrics) CHECK(m.name != "agent_disk_written_bytes_total");
  }

  CHECK(parse_io_write_bytes("read_bytes: 0\nwrite_bytes: 4096\n") == 4096u);
  CHECK(parse_io_write_bytes("write_bytes: 18446744073709551615") == 18446744073709551615u);
  CHECK_FALSE(parse_io_write_bytes("cancelled_write_bytes: 16384\n"));
  CHECK_FALSE(parse_io_write_bytes("write_bytes: -1\n"));
  CHECK_FALSE(parse_io_write_bytes("write_bytes:\n"));
  CHECK_FALSE(parse_io_write_bytes(""));
}

TEST_CASE("telemetry: docs/api.md lists every self-metric with its labels and type") {
  std::ifstream in(KIWI_SOURCE_DIR "/docs/api.md");
  REQUIRE(in);
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (auto& row : Telemetry::rows()) {
    std::string entry = "| `kiwi_" + std::string(row.name);
    if (!row.labels.empty()) entry += "{" + std::string(row.labels) + "}";
    entry += "` | ";
    entry += row.kind == kiwi::MetricKind::counter ? "counter" : "gauge";
    INFO(entry);
    CHECK(doc.find(entry) != std::string::npos);
  }
}

TEST_CASE("telemetry: each notifier's queue, sends, failures and drops, by its name") {
  SnapshotHolder holder;
  AgentData data(holder, nullptr);
  // No notifier: none of their families (the golden /metrics files hold them to that).
  for (auto& m : read_report(data, tick()).metrics) CHECK_FALSE(m.name.starts_with("notifier_"));

  kiwi::NotifierStatus am;
  am.name = "am";
  am.kind = "alertmanager";
  am.state = "retrying";
  am.queued = 3;
  am.sent_total = 12;
  am.failures_total = 4;
  am.dropped_total = 1;
  am.last_sent_at = 1764475739.75;
  am.last_error = "HTTP 503 from http://127.0.0.1:9093/api/v2/alerts";
  kiwi::NotifierStatus phone;
  phone.name = "phone";
  phone.kind = "ntfy";
  phone.state = "idle";
  data.notifier_status = [&] { return std::vector<kiwi::NotifierStatus>{am, phone}; };
  const SampleCall c = read_report(data, tick());
  INFO(c.message << c.dropped_note);
  CHECK(c.dropped == 0);
  CHECK(value_of(c, "notifier_queue_length", {{"notifier", "am"}}) == 3);
  CHECK(value_of(c, "notifier_notifications_sent_total", {{"notifier", "am"}}) == 12);
  CHECK(value_of(c, "notifier_failures_total", {{"notifier", "am"}}) == 4);
  CHECK(value_of(c, "notifier_notifications_dropped_total", {{"notifier", "am"}}) == 1);
  CHECK(value_of(c, "notifier_last_sent_timestamp_seconds", {{"notifier", "am"}}) == 1764475739);
  CHECK(value_of(c, "notifier_last_error_info", {{"notifier", "am"}, {"error", am.last_error}}) ==
        1);
  CHECK(value_of(c, "notifier_queue_length", {{"notifier", "phone"}}) == 0);
  // Nothing sent yet, no error: no timestamp of a send and no error series.
  std::size_t phone_series = 0;
  for (auto& m : c.metrics)
    if (m.labels.size() && m.labels[0] == std::pair<std::string, std::string>{"notifier", "phone"})
      ++phone_series;
  CHECK(phone_series == 4);
}

TEST_CASE("telemetry: /metrics renders the notifier families by the notifier's name") {
  SnapshotHolder holder;
  AgentData data(holder, nullptr);
  kiwi::NotifierStatus am;
  am.name = "am";
  am.kind = "alertmanager";
  am.state = "retrying";
  am.queued = 3;
  am.last_sent_at = 1764475739.75;
  am.last_error = "HTTP 503: \"busy\"\n";
  data.notifier_status = [&] { return std::vector<kiwi::NotifierStatus>{am}; };
  const std::string text = metrics_text(data);
  if (const char* dump = std::getenv("KIWI_DUMP_METRICS")) std::ofstream(dump) << text;
  CHECK_THAT(text, Catch::Contains("# HELP kiwi_notifier_queue_length alert transitions waiting to "
                                   "be sent by the notifier (its queue, kept in the database)\n"
                                   "# TYPE kiwi_notifier_queue_length gauge\n"
                                   "kiwi_notifier_queue_length{notifier=\"am\"} 3\n"));
  CHECK_THAT(text, Catch::Contains("# TYPE kiwi_notifier_notifications_sent_total counter\n"
                                   "kiwi_notifier_notifications_sent_total{notifier=\"am\"} 0\n"));
  CHECK_THAT(text, Catch::Contains("kiwi_notifier_last_sent_timestamp_seconds{notifier=\"am\"} "
                                   "1764475739\n"));
  CHECK_THAT(text, Catch::Contains("kiwi_notifier_last_error_info{notifier=\"am\",error=\"HTTP "
                                   "503: \\\"busy\\\"\\n\"} 1\n"));
}
