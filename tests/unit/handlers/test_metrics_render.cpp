// The Prometheus exposition of a snapshot, on the pure renderer.
#include <catch2/catch.hpp>
#include <sstream>

#include "metrics_render.hpp"

namespace {
constexpr kiwi::MetricSpec kThermal[] = {{"thermal_celsius", kiwi::Unit::celsius,
                                          kiwi::MetricKind::gauge, "sensor",
                                          "temperature of one zone"}};

kiwi::Snapshot snapshot() {
  kiwi::Snapshot s;
  s.sequence = 7;
  s.timestamp = 1764475800;
  kiwi::SensorReport t;
  t.name = "thermal";
  t.plugin = "thermal";
  t.duration_seconds = 0.00025;
  t.metrics = {{"thermal_celsius",
                {{"sensor", "soc \"hot\"\\zone\n"}},
                45.5,
                "celsius",
                kiwi::MetricKind::gauge},
               {"thermal_celsius",
                {{"sensor", "soc \"hot\"\\zone\n"}},
                46,
                "celsius",
                kiwi::MetricKind::gauge},
               {"wakeups", {}, 12, "count", kiwi::MetricKind::counter}};
  kiwi::SensorReport bad;
  bad.name = "gpu";
  bad.plugin = "gpu";
  bad.state = kiwi::SensorState::error;
  bad.errors_total = 3;
  s.sensors = {t, bad};
  return s;
}
}  // namespace

TEST_CASE("metrics: families with HELP and TYPE, escaped labels, counters end in _total") {
  kiwi::AgentStats stats;
  stats.version = "0.1.0";
  stats.plugins.push_back(
      {"thermal", kiwi::PluginKind::sensor, "thermal", "/x.so", 1, 0, kThermal, nullptr});
  stats.http_requests.push_back({"/api/current", 200, 5});
  std::string text = kiwi_metrics::render(snapshot(), stats);
  CHECK_THAT(text, Catch::StartsWith(
                       "# HELP kiwi_thermal_celsius temperature of one zone\n"
                       "# TYPE kiwi_thermal_celsius gauge\n"
                       "kiwi_thermal_celsius{sensor=\"soc \\\"hot\\\"\\\\zone\\n\"} 45.5\n"
                       "# HELP kiwi_wakeups_total wakeups from sensor plugin thermal (count)\n"
                       "# TYPE kiwi_wakeups_total counter\n"
                       "kiwi_wakeups_total 12\n"));
  // The duplicate series (same name and labels) is kept once.
  CHECK(text.find("46\n") == std::string::npos);
  // Only the reports: the agent's own metrics are a report of their own (test_telemetry.cpp),
  // never made up here from the counters.
  CHECK(text.find("kiwi_build_info") == std::string::npos);
  CHECK(text.find("kiwi_http_requests_total") == std::string::npos);
  CHECK(text.find("gpu") == std::string::npos);  // a report without metrics has no series
}

TEST_CASE("metrics: sample values in Prometheus spelling") {
  CHECK(kiwi_metrics::format_value(8300695552) == "8300695552");
  CHECK(kiwi_metrics::format_value(0.1) == "0.1");
  CHECK(kiwi_metrics::format_value(std::nan("")) == "NaN");
  CHECK(kiwi_metrics::format_value(-1.0 / 0.0) == "-Inf");
}

TEST_CASE("metrics: escaping of HELP text and label values, at the ends and in between") {
  CHECK(kiwi_metrics::escape_help("") == "");
  CHECK(kiwi_metrics::escape_help("a \"quoted\" path\\to\nnext") ==
        "a \"quoted\" path\\\\to\\nnext");  // quotes stay as they are in HELP
  CHECK(kiwi_metrics::escape_help("\n\\") == "\\n\\\\");
  CHECK(kiwi_metrics::escape_label_value("\"x\"") == "\\\"x\\\"");
  CHECK(kiwi_metrics::escape_label_value("a\\b\nc\"") == "a\\\\b\\nc\\\"");
}

TEST_CASE(
    "metrics: a label set repeated in one family is kept once, the same set in two families "
    "twice") {
  kiwi::Snapshot s;
  s.sequence = 1;
  kiwi::SensorReport r;
  r.name = r.plugin = "x";
  for (double v : {1.0, 2.0})
    for (const char* name : {"a_bytes", "b_bytes"})
      r.metrics.push_back({name, {{"dev", "sda"}}, v, "bytes", kiwi::MetricKind::gauge});
  r.metrics.push_back({"a_bytes", {{"dev", "sdb"}}, 3, "bytes", kiwi::MetricKind::gauge});
  s.sensors = {r};
  const std::string text = kiwi_metrics::render(s, {});
  CHECK_THAT(text, Catch::Contains("kiwi_a_bytes{dev=\"sda\"} 1\nkiwi_a_bytes{dev=\"sdb\"} 3\n"));
  CHECK_THAT(text, Catch::EndsWith("kiwi_b_bytes{dev=\"sda\"} 1\n"));
  CHECK(text.find("} 2\n") == std::string::npos);
}

TEST_CASE("metrics: thousands of series, each emitted twice, are each kept once") {
  kiwi::Snapshot s;
  s.sequence = 1;
  kiwi::SensorReport r;
  r.name = r.plugin = "x";
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < 3000; ++i)
      r.metrics.push_back({i % 2 ? "a_bytes" : "b_bytes",
                           {{"dev", "d" + std::to_string(i)}},
                           static_cast<double>(pass),
                           "bytes",
                           kiwi::MetricKind::gauge});
  s.sensors = {r};
  const std::string text = kiwi_metrics::render(s, {});
  std::size_t series = 0, first_pass = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.find("{dev=") != std::string::npos) {
      ++series;
      first_pass += line.ends_with("} 0");  // the second pass is dropped whole
    }
  CHECK(series == 3000);
  CHECK(first_pass == 3000);
}

TEST_CASE(
    "metrics: a histogram and a summary are one family each, their series under their names") {
  kiwi::Snapshot s;
  kiwi::SensorReport r;
  r.name = "app";
  r.plugin = "exec";
  const auto H = kiwi::MetricKind::histogram, S = kiwi::MetricKind::summary;
  r.metrics = {{"rpc_seconds_bucket", {{"le", "0.1"}}, 3, "", H},
               {"rpc_seconds_bucket", {{"le", "+Inf"}}, 5, "", H},
               {"rpc_seconds_sum", {}, 1.5, "seconds", H},
               {"rpc_seconds_count", {}, 5, "", H},
               {"gc_seconds", {{"quantile", "0.5"}}, 0.002, "seconds", S},
               {"gc_seconds_sum", {}, 0.25, "seconds", S},
               {"gc_seconds_count", {}, 40, "", S}};
  s.sensors = {r};
  const std::string text = kiwi_metrics::render(s, kiwi::AgentStats{});
  CHECK(text ==
        "# HELP kiwi_rpc_seconds rpc_seconds from sensor plugin exec\n"
        "# TYPE kiwi_rpc_seconds histogram\n"
        "kiwi_rpc_seconds_bucket{le=\"0.1\"} 3\n"
        "kiwi_rpc_seconds_bucket{le=\"+Inf\"} 5\n"
        "kiwi_rpc_seconds_sum 1.5\n"
        "kiwi_rpc_seconds_count 5\n"
        "# HELP kiwi_gc_seconds gc_seconds from sensor plugin exec\n"
        "# TYPE kiwi_gc_seconds summary\n"
        "kiwi_gc_seconds{quantile=\"0.5\"} 0.002\n"
        "kiwi_gc_seconds_sum 0.25\n"
        "kiwi_gc_seconds_count 40\n");
}

TEST_CASE("metrics: a family a sensor made at run time has the HELP the sensor gave") {
  kiwi::Snapshot s;
  kiwi::SensorReport r;
  r.name = "app";
  r.plugin = "exec";
  r.metrics = {{"rpc_seconds_sum", {}, 1.5, "seconds", kiwi::MetricKind::histogram},
               {"queue_length", {}, 3, "", kiwi::MetricKind::gauge},
               {"other", {}, 1, "", kiwi::MetricKind::gauge}};
  r.help = {{"rpc_seconds", "How long an RPC took.\nIn \\seconds\\."},
            {"queue_length", "Jobs waiting."}};
  s.sensors = {r};
  const std::string text = kiwi_metrics::render(s, kiwi::AgentStats{});
  CHECK_THAT(text, Catch::Contains("# HELP kiwi_rpc_seconds How long an RPC took.\\nIn "
                                   "\\\\seconds\\\\.\n# TYPE kiwi_rpc_seconds histogram\n"));
  CHECK_THAT(text, Catch::Contains("# HELP kiwi_queue_length Jobs waiting.\n"));
  CHECK_THAT(text, Catch::Contains("# HELP kiwi_other other from sensor plugin exec\n"));
}
