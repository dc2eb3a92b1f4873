// kiwi/json.hpp: the SDK's JSON writing, and the /api/current body. The number and string forms
// are the bytes the agent has served since 0.1 (tests/golden compares whole bodies).
#include <catch2/catch.hpp>

#include <cmath>
#include <kiwi/json.hpp>
#include <limits>
#include <string>

namespace {

std::string number(double v) {
  std::string out;
  kiwi::append_json_number(out, v);
  return out;
}

std::string string_literal(std::string_view s) {
  std::string out;
  kiwi::append_json_string(out, s);
  return out;
}

}  // namespace

TEST_CASE("json: integral values print as integers, -0 as 0") {
  CHECK(number(0) == "0");
  CHECK(number(-0.0) == "0");
  CHECK(number(1) == "1");
  CHECK(number(-42) == "-42");
  CHECK(number(4096e6) == "4096000000");
  CHECK(number(8999999999999999.0) == "8999999999999999");  // the largest below 9e15's bound
  CHECK(number(-8999999999999999.0) == "-8999999999999999");
}

TEST_CASE("json: from 9e15 up, integral values print as decimals with .0, then with an exponent") {
  CHECK(number(9e15) == "9000000000000000.0");
  CHECK(number(9007199254740992.0) == "9007199254740992.0");  // 2^53
  CHECK(number(1e16) == "10000000000000000.0");
  CHECK(number(-1e16) == "-10000000000000000.0");
  CHECK(number(1e20) == "100000000000000000000.0");
  CHECK(number(1e21) == "1e21");
  CHECK(number(1.5e300) == "1.5e300");
  CHECK(number(std::numeric_limits<double>::max()) == "1.7976931348623157e308");
}

TEST_CASE("json: other values are rounded to 6 decimals, then printed shortest") {
  CHECK(number(0.1 + 0.2) == "0.3");
  CHECK(number(0.5) == "0.5");
  CHECK(number(-2.25) == "-2.25");
  CHECK(number(12.3456789) == "12.345679");
  CHECK(number(123456789.123456789) == "123456789.123457");
  CHECK(number(0.000002) == "0.000002");
  CHECK(number(0.0000015) == "0.000002");
  CHECK(number(1.000001) == "1.000001");
  // Below the sixth decimal: rounded to zero, printed as the double it then is.
  CHECK(number(1e-7) == "0.0");
  CHECK(number(-1e-7) == "-0.0");
  CHECK(number(4e-7) == "0.0");
  CHECK(number(6e-7) == "0.000001");
}

TEST_CASE("json: NaN and infinities, which JSON cannot hold, print as null") {
  CHECK(number(std::numeric_limits<double>::quiet_NaN()) == "null");
  CHECK(number(std::numeric_limits<double>::infinity()) == "null");
  CHECK(number(-std::numeric_limits<double>::infinity()) == "null");
}

TEST_CASE("json: strings escape quotes, backslashes and control characters only") {
  CHECK(string_literal("") == "\"\"");
  CHECK(string_literal("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(string_literal("tab\tnl\ncr\rbs\bff\f") == "\"tab\\tnl\\ncr\\rbs\\bff\\f\"");
  CHECK(string_literal(std::string_view("\x00\x01\x1f", 3)) == "\"\\u0000\\u0001\\u001F\"");
  CHECK(string_literal("/ \x7f caf\xc3\xa9") == "\"/ \x7f caf\xc3\xa9\"");
}

TEST_CASE("json: strings with escapes and bad bytes at either end of a plain run") {
  CHECK(string_literal("\"") == "\"\\\"\"");
  CHECK(string_literal("\nabc\n") == "\"\\nabc\\n\"");
  CHECK(string_literal("abc\\") == "\"abc\\\\\"");
  // Each byte that starts no well-formed sequence is one U+FFFD; a good sequence is kept whole.
  CHECK(string_literal("\xff") == "\"\xef\xbf\xbd\"");
  CHECK(string_literal("a\xc3") == "\"a\xef\xbf\xbd\"");  // cut short at the end
  CHECK(string_literal("\xc3\xa9\xe2\x82\xac") == "\"\xc3\xa9\xe2\x82\xac\"");  // two good ones
  CHECK(string_literal("\xc0\xae/x") ==
        "\"\xef\xbf\xbd\xef\xbf\xbd/x\"");  // overlong: two bad bytes
  CHECK(string_literal("x\xed\xa0\x80") ==
        "\"x\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");  // a surrogate
  const std::string long_plain(1000, 'a');
  CHECK(string_literal(long_plain + "\t" + long_plain) ==
        "\"" + long_plain + "\\t" + long_plain + "\"");
}

TEST_CASE("json: the /api/current body of a snapshot") {
  kiwi::Snapshot s;
  s.sequence = 7;
  s.timestamp = 1700000000.25;
  s.interval_seconds = 1;
  s.host = "kiwi\"pi";
  s.agent_version = "0.3.0";
  s.started_at = 1699999990.9;
  kiwi::SensorReport& cpu = s.sensors.emplace_back();
  cpu.name = "cpu";
  cpu.plugin = "cpu";
  cpu.timestamp = 1700000000.25;
  cpu.duration_seconds = 0.0001234;
  cpu.metrics.push_back({"cpu_usage_ratio", {{"cpu", "total"}}, 0.1 + 0.2, "ratio"});
  cpu.metrics.push_back({"cpu_seconds_total", {}, 123456.0, "seconds", kiwi::MetricKind::counter});
  kiwi::SensorReport& bad = s.sensors.emplace_back();
  bad.name = "thermal";
  bad.plugin = "thermal";
  bad.state = kiwi::SensorState::error;
  bad.message = "read\tfailed";
  bad.timestamp = 1700000000;
  bad.errors_total = 3;
  bad.invalid_metrics_total = 1;
  CHECK(kiwi::render_snapshot_json(s) ==
        R"({"version":1,"host":"kiwi\"pi","sequence":7,"timestamp":1700000000.25,)"
        R"("interval_seconds":1,"stale":false,"agent":{"version":"0.3.0","uptime_seconds":9},)"
        R"("sensors":{"cpu":{"plugin":"cpu","status":"ok","timestamp":1700000000.25,)"
        R"("duration_seconds":0.000123,"metrics":[{"name":"cpu_usage_ratio",)"
        R"("labels":{"cpu":"total"},"value":0.3,"unit":"ratio"},{"name":"cpu_seconds_total",)"
        R"("value":123456,"unit":"seconds","kind":"counter"}]},"thermal":{"plugin":"thermal",)"
        R"("status":"error","message":"read\tfailed","timestamp":1700000000,)"
        R"("duration_seconds":0,"errors_total":3,"invalid_metrics_total":1,"metrics":[]}}})");
  // Before the first sample: no sensors.
  CHECK(kiwi::render_snapshot_json(kiwi::Snapshot{}) ==
        R"({"version":1,"host":"","sequence":0,"timestamp":0,"interval_seconds":1,)"
        R"("stale":false,"agent":{"version":"","uptime_seconds":0},"sensors":{}})");
}
