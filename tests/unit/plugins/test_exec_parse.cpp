// The exec sensor's parsers on text: the Prometheus text format (checked against promtool where it
// is installed) and the JSON metric objects; each refusal with its position.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "exec_parse.hpp"
#include "exec_sensor.hpp"
#include "test_support.hpp"

using kiwi::MetricKind;
using kiwi::exec::parse_json;
using kiwi::exec::parse_prometheus;
using namespace std::chrono_literals;

namespace {

// Valid exposition text, each of which promtool also accepts.
const char* const kValid[] = {
    // The example in the format's documentation, abridged.
    "# HELP http_requests_total The total number of HTTP requests.\n"
    "# TYPE http_requests_total counter\n"
    "http_requests_total{method=\"post\",code=\"200\"} 1027 1395066363000\n"
    "http_requests_total{method=\"post\",code=\"400\"}    3 1395066363000\n"
    "\n"
    "# Escaping in label values:\n"
    "msdos_file_access_time_seconds{path=\"C:\\\\DIR\\\\FILE.TXT\",error=\"Cannot find file:\\n"
    "\\\"FILE.TXT\\\"\"} 1.458255915e9\n"
    "\n"
    "# Minimalistic line:\n"
    "metric_without_timestamp_and_labels 12.47\n"
    "\n"
    "# A weird metric from before the epoch:\n"
    "something_weird{problem=\"division by zero\"} +Inf -3982045\n"
    "\n"
    "# A histogram, which has a pretty complex representation in the text format:\n"
    "# HELP http_request_duration_seconds A histogram of the request duration.\n"
    "# TYPE http_request_duration_seconds histogram\n"
    "http_request_duration_seconds_bucket{le=\"0.05\"} 24054\n"
    "http_request_duration_seconds_bucket{le=\"+Inf\"} 144320\n"
    "http_request_duration_seconds_sum 53423\n"
    "http_request_duration_seconds_count 144320\n"
    "\n"
    "# Finally a summary, which has a complex representation, too:\n"
    "# HELP rpc_duration_seconds A summary of the RPC duration in seconds.\n"
    "# TYPE rpc_duration_seconds summary\n"
    "rpc_duration_seconds{quantile=\"0.01\"} 3102\n"
    "rpc_duration_seconds{quantile=\"0.99\"} 76656\n"
    "rpc_duration_seconds_sum 1.7560473e+07\n"
    "rpc_duration_seconds_count 2693\n",
    // Tabs, a trailing comma, NaN and a negative value.
    "# TYPE probe_temperature_celsius gauge\n"
    "probe_temperature_celsius{sensor=\"a\",}\t41.5\n"
    "probe_up NaN\n"
    "probe_offset_seconds -0.25\n",
    // Only comments and blank lines: valid, and no metrics.
    "# nothing to report\n\n",
    // An empty label set, exponents, a bare fraction and Inf spelt out.
    "a_metric{} 1e3\n"
    "b_metric .25\n"
    "c_metric -Inf\n"
    "d_metric 2.5E-1\n",
};

struct Bad {
  const char* text;
  const char* error;
};

const Bad kInvalid[] = {
    {"1abc 3\n", "output line 1, column 1: expected a metric name"},
    {"ok 1\nbad-name 3\n", "output line 2, column 4: invalid character '-' in metric name"},
    {"a{x=\"1} 2\n", "output line 1, column 5: unterminated value of label x"},
    {"a{x=1} 2\n", "output line 1, column 5: expected '\"' to open the value of label x"},
    {"a{x \"1\"} 2\n", "output line 1, column 5: expected '=' after label name x"},
    {"a{x=\"1\" y=\"2\"} 2\n",
     "output line 1, column 9: expected ',' or '}' after the value of label x"},
    {"a{x=\"1\",x=\"2\"} 2\n", "output line 1, column 9: label x given twice"},
    {"a{x=\"\\t\"} 2\n",
     "output line 1, column 6: invalid escape sequence in the value of label x (only \\\\, \\\" "
     "and \\n)"},
    {"a{x=\"1\"\n", "output line 1, column 8: unterminated label set (no '}')"},
    {"a{1=\"1\"} 2\n", "output line 1, column 3: expected a label name"},
    {"a\n", "output line 1, column 2: missing value for a"},
    {"a{x=\"y\"}\n", "output line 1, column 9: missing value for a"},
    {"a 1\nb 2\n\nc x12\n", "output line 4, column 3: bad number \"x12\""},
    {"a 1_000\n", "output line 1, column 3: bad number \"1_000\""},
    {"a 0x10\n", "output line 1, column 3: bad number \"0x10\""},
    {"a 0x1p-2\n", "output line 1, column 3: bad number \"0x1p-2\""},
    {"a --1\n", "output line 1, column 3: bad number \"--1\""},
    {"a nan(1)\n", "output line 1, column 3: bad number \"nan(1)\""},
    {"a 1e999\n", "output line 1, column 3: bad number \"1e999\""},
    {"a 1 12.5\n", "output line 1, column 5: bad timestamp \"12.5\" (milliseconds, an integer)"},
    {"a 1 12 13\n", "output line 1, column 8: unexpected text after the timestamp"},
    {"# TYPE a counter\n# TYPE a gauge\n", "output line 2, column 1: second TYPE line for a"},
    {"a 1\n# TYPE a counter\n", "output line 2, column 1: TYPE line for a after its samples"},
    {"# TYPE a countr\n",
     "output line 1, column 10: unknown metric type \"countr\" (counter, gauge, histogram, "
     "summary or untyped)"},
    {"# TYPE a\n", "output line 1, column 9: TYPE line for a has no type"},
    {"# HELP\n", "output line 1, column 7: expected a metric name after HELP"},
    {"# HELP a one\n# HELP a two\n", "output line 2, column 1: second HELP line for a"},
    {"# HELP a bad \\t escape\n",
     "output line 1, column 14: invalid escape sequence in HELP text (only \\\\ and \\n)"},
    {"a{x=\"\xff\"} 1\n", "output line 1, column 5: the value of label x is not UTF-8"},
};

// promtool check metrics on `text`: its exit status (0 = clean), or -1 when it is not installed.
int promtool_check(const std::string& text) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) return -1;
  kiwi_test::TempDir dir;
  const auto file = dir.path / "metrics.txt";
  std::ofstream(file, std::ios::binary) << text;
  const int status =
      std::system(("promtool check metrics < '" + file.string() + "' >/dev/null 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

const kiwi::exec::Metric& find(const kiwi::exec::Parsed& p, const std::string& name,
                               std::size_t nth = 0) {
  for (const auto& m : p.metrics)
    if (m.name == name && nth-- == 0) return m;
  FAIL("no metric " << name);
  throw;
}

}  // namespace

TEST_CASE("exec: prometheus text: every valid example parses") {
  for (const char* text : kValid) {
    INFO(text);
    const auto p = parse_prometheus(text);
    CHECK_FALSE(p.error.has_value());
    if (p.error) INFO(p.error->str());
  }
}

TEST_CASE("exec: prometheus text: the valid examples are valid to promtool too") {
  // promtool's lint rules go beyond the format (e.g. counters named *_total); the check here is
  // that it parses them: exit 0 (clean) or 3 (lint warnings only), not 1 (unparsable).
  for (const char* text : kValid) {
    INFO(text);
    const int status = promtool_check(text);
    if (status == -1) kiwi_test::skip_test("promtool is not installed (tools/setup.sh --test)");
    CHECK((status == 0 || status == 3));
  }
}

TEST_CASE("exec: prometheus text: each invalid input is refused with line and column") {
  for (const auto& bad : kInvalid) {
    INFO(bad.text);
    const auto p = parse_prometheus(bad.text);
    REQUIRE(p.error.has_value());
    CHECK(p.error->str() == bad.error);
    CHECK(p.metrics.empty());
  }
}

TEST_CASE("exec: prometheus text: the invalid inputs are invalid to promtool too") {
  // All but two: Prometheus' parser takes a TYPE line without a type and a bare "# HELP" for
  // comments; this one refuses them, as they are surely mistakes.
  for (const auto& bad : kInvalid) {
    const std::string text = bad.text;
    if (text == "# TYPE a\n" || text == "# HELP\n") continue;
    INFO(text);
    const int status = promtool_check(text);
    if (status == -1) kiwi_test::skip_test("promtool is not installed (tools/setup.sh --test)");
    CHECK(status == 1);
  }
}

TEST_CASE("exec: prometheus text: values, labels, escapes, kinds and units") {
  const auto p = parse_prometheus(kValid[0]);
  REQUIRE_FALSE(p.error);
  const auto& req = find(p, "http_requests_total");
  CHECK(req.kind == MetricKind::counter);
  CHECK(req.unit == "");
  CHECK(req.value == 1027);  // the timestamp is ignored
  CHECK(req.labels ==
        std::vector<std::pair<std::string, std::string>>{{"method", "post"}, {"code", "200"}});
  CHECK(find(p, "http_requests_total", 1).value == 3);

  const auto& ms = find(p, "msdos_file_access_time_seconds");
  CHECK(ms.kind == MetricKind::gauge);
  CHECK(ms.unit == "seconds");
  CHECK(ms.value == 1.458255915e9);
  CHECK(ms.labels[0].second == "C:\\DIR\\FILE.TXT");
  CHECK(ms.labels[1].second == "Cannot find file:\n\"FILE.TXT\"");

  CHECK(find(p, "metric_without_timestamp_and_labels").value == 12.47);
  CHECK(std::isinf(find(p, "something_weird").value));

  // histogram: buckets, sum and count are the histogram's series; the sum has the family's unit
  const auto& bucket = find(p, "http_request_duration_seconds_bucket");
  CHECK(bucket.kind == MetricKind::histogram);
  CHECK(bucket.unit == "");
  CHECK(bucket.labels[0].second == "0.05");
  CHECK(find(p, "http_request_duration_seconds_bucket", 1).labels[0].second == "+Inf");
  CHECK(find(p, "http_request_duration_seconds_sum").kind == MetricKind::histogram);
  CHECK(find(p, "http_request_duration_seconds_sum").unit == "seconds");
  CHECK(find(p, "http_request_duration_seconds_count").kind == MetricKind::histogram);
  CHECK(find(p, "http_request_duration_seconds_count").unit == "");

  // summary: quantiles with the family's unit, sum and count: the summary's series
  const auto& q = find(p, "rpc_duration_seconds");
  CHECK(q.kind == MetricKind::summary);
  CHECK(q.unit == "seconds");
  CHECK(q.labels[0] == std::pair<std::string, std::string>{"quantile", "0.01"});
  CHECK(find(p, "rpc_duration_seconds_sum").kind == MetricKind::summary);
  CHECK(find(p, "rpc_duration_seconds_sum").value == 1.7560473e+07);
  CHECK(find(p, "rpc_duration_seconds_count").kind == MetricKind::summary);
  CHECK(p.metrics.size() == 13);

  const auto q2 = parse_prometheus(kValid[1]);
  REQUIRE_FALSE(q2.error);
  CHECK(find(q2, "probe_temperature_celsius").unit == "celsius");
  CHECK(find(q2, "probe_temperature_celsius").value == 41.5);
  CHECK(find(q2, "probe_temperature_celsius").labels.size() == 1);
  CHECK(std::isnan(find(q2, "probe_up").value));
  CHECK(find(q2, "probe_offset_seconds").value == -0.25);

  CHECK(parse_prometheus(kValid[2]).metrics.empty());
  const auto q3 = parse_prometheus(kValid[3]);
  CHECK(find(q3, "a_metric").value == 1000);
  CHECK(find(q3, "b_metric").value == 0.25);
  CHECK(find(q3, "c_metric").value == -INFINITY);
  CHECK(find(q3, "d_metric").value == 0.25);

  // More lenient than Prometheus (whose parser wants a newline at the end): a last line without.
  const auto last = parse_prometheus("a 1\nb 2");
  REQUIRE_FALSE(last.error);
  CHECK(find(last, "b").value == 2);

  // No output at all, and CRLF line ends.
  CHECK(parse_prometheus("").metrics.empty());
  CHECK_FALSE(parse_prometheus("").error);
  const auto crlf = parse_prometheus("# TYPE a_total counter\r\na_total 5\r\n");
  REQUIRE_FALSE(crlf.error);
  CHECK(find(crlf, "a_total").kind == MetricKind::counter);
}

TEST_CASE("exec: the unit from a metric's name") {
  using kiwi::exec::unit_from_name;
  CHECK(unit_from_name("disk_read_bytes_total", true) == "bytes");
  CHECK(unit_from_name("disk_read_bytes_total", false) == "");
  CHECK(unit_from_name("uptime_seconds", false) == "seconds");
  CHECK(unit_from_name("board_temp_celsius", false) == "celsius");
  CHECK(unit_from_name("fan_hertz", false) == "hertz");
  CHECK(unit_from_name("battery_ratio", false) == "ratio");
  CHECK(unit_from_name("net_rx_bytes_per_second", false) == "bytes_per_second");
  CHECK(unit_from_name("requests_per_second", false) == "per_second");
  CHECK(unit_from_name("node_hwmon_in_volts", false) == "volts");  // ABI 1.5's units
  CHECK(unit_from_name("ups_output_amperes", false) == "amperes");
  CHECK(unit_from_name("ups_load_watts", false) == "watts");
  CHECK(unit_from_name("node_hwmon_fan_rpm", false) == "rpm");
  CHECK(unit_from_name("node_hwmon_curr_amps", false) == "");  // not the unit's name
  CHECK(unit_from_name("queue_length", false) == "");
  CHECK(unit_from_name("bytes", false) == "");  // a suffix, not the whole name
}

TEST_CASE("exec: json: the metric objects /api/current shows") {
  const auto p = parse_json(R"([
    {"name":"probe_temperature_celsius","labels":{"sensor":"a"},"value":41.5,"unit":"celsius"},
    {"name":"probe_reads_total","value":12,"unit":"","kind":"counter"},
    {"name":"probe_up","value":1,"unit":"","kind":"gauge"},
    {"name":"probe_seconds_bucket","labels":{"le":"+Inf"},"value":3,"unit":"","kind":"histogram"}
  ])");
  REQUIRE_FALSE(p.error);
  REQUIRE(p.metrics.size() == 4);
  CHECK(p.metrics[3].kind == MetricKind::histogram);
  CHECK(p.metrics[0].labels == std::vector<std::pair<std::string, std::string>>{{"sensor", "a"}});
  CHECK(p.metrics[0].unit == "celsius");
  CHECK(p.metrics[0].kind == MetricKind::gauge);
  CHECK(p.metrics[1].kind == MetricKind::counter);
  CHECK(p.metrics[1].value == 12);
  CHECK(p.metrics[2].kind == MetricKind::gauge);
  CHECK(parse_json("[]").metrics.empty());
  CHECK_FALSE(parse_json(" [] \n").error);
}

TEST_CASE("exec: json: each wrong shape is refused, naming the element and field") {
  const std::pair<const char*, const char*> cases[] = {
      {"", "output line 1, column 1: not valid JSON: The document is empty."},
      {"[\n{\"name\":\"a\",}]",
       "output line 2, column 13: not valid JSON: Missing a name for object member."},
      {"[] []",
       "output line 1, column 4: not valid JSON: The document root must not be followed by "
       "other values."},
      {"{\"metrics\":[]}",
       "output: must be a JSON array of metric objects ({\"name\", \"value\", \"unit\", ...})"},
      {"[1]", "output [0]: must be an object"},
      {R"([{"name":"a","value":1,"unit":""},{"value":1,"unit":""}])",
       "output [1]: has no \"name\""},
      {R"([{"name":"a","unit":""}])", "output [0]: has no \"value\""},
      {R"([{"name":"a","value":1}])", "output [0]: has no \"unit\" (\"\" for none)"},
      {R"([{"name":"a","value":"1","unit":""}])", "output [0].value: must be a number"},
      {R"([{"name":"a","value":null,"unit":""}])", "output [0].value: must be a number"},
      {R"([{"name":1,"value":1,"unit":""}])", "output [0].name: must be a string"},
      {R"([{"name":"a","value":1,"unit":3}])", "output [0].unit: must be a string"},
      {R"([{"name":"a","value":1,"unit":"","kind":"rate"}])",
       "output [0].kind: must be \"gauge\", \"counter\", \"histogram\" or \"summary\", not "
       "\"rate\""},
      {R"([{"name":"a","value":1,"unit":"","labels":["x"]}])",
       "output [0].labels: must be an object of strings"},
      {R"([{"name":"a","value":1,"unit":"","labels":{"x":1}}])",
       "output [0].labels.x: must be a string"},
      {R"([{"name":"a","vaule":1,"unit":""}])",
       "output [0].vaule: unknown field (a metric has name, labels, value, unit and kind)"},
  };
  for (const auto& [text, error] : cases) {
    INFO(text);
    const auto p = parse_json(text);
    REQUIRE(p.error.has_value());
    CHECK(p.error->str() == error);
    CHECK(p.metrics.empty());
  }
}

TEST_CASE("exec: the program is stopped a little before the collector's deadline") {
  using kiwi::exec::kill_margin;
  using kiwi::exec::shown_timeout;
  CHECK(kill_margin(2s) == 50ms);
  CHECK(kill_margin(200ms) == 20ms);
  CHECK(shown_timeout(499'900us) == 500ms);
  CHECK(shown_timeout(1996ms) == 2s);
  CHECK(shown_timeout(2s) == 2s);
  CHECK(shown_timeout(50ms) == 50ms);
}

TEST_CASE("exec: prometheus: a summary's NaN quantile (no observations) is left out") {
  const auto p = parse_prometheus(
      "# TYPE gc_seconds summary\n"
      "gc_seconds{quantile=\"0.5\"} NaN\n"
      "gc_seconds{quantile=\"0.9\"} 0.25\n"
      "gc_seconds_sum 0\n"
      "gc_seconds_count 0\n"
      "probe_up NaN\n");
  REQUIRE_FALSE(p.error);
  std::vector<std::string> names;
  for (auto& m : p.metrics) names.push_back(m.name);
  // The gauge's NaN is kept for the agent's check to refuse and name, as before.
  CHECK(names ==
        std::vector<std::string>{"gc_seconds", "gc_seconds_sum", "gc_seconds_count", "probe_up"});
  CHECK(p.metrics[0].value == 0.25);
}

TEST_CASE("exec: prometheus: HELP text is kept per family, unescaped") {
  const auto p = parse_prometheus(
      "# HELP rpc_seconds How long an RPC took, in \\\\seconds\\\\.\\nSecond line.\n"
      "# TYPE rpc_seconds histogram\n"
      "rpc_seconds_sum 1\n"
      "# HELP up_total Times it came up.\n"
      "up_total 3\n");
  REQUIRE_FALSE(p.error);
  CHECK(p.help == std::vector<std::pair<std::string, std::string>>{
                      {"rpc_seconds", "How long an RPC took, in \\seconds\\.\nSecond line."},
                      {"up_total", "Times it came up."}});
  CHECK(parse_prometheus("# HELP a x\na{ 1\n").help.empty());  // refused output: nothing kept
}
