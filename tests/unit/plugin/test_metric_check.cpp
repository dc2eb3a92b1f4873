// What a sensor emits is checked in one place before it goes anywhere (issue 11, item 6), and
// the small HTTP rules every route shares: conditional requests and gzip negotiation (item 11).
#include <catch2/catch.hpp>
#include <cmath>

#include <kiwi/io.hpp>

#include <kiwi/handler.hpp>

#include "plugin/metric_check.hpp"

using namespace kiwi::agent;

namespace {
kiwi::Request with_header(const std::vector<kiwi::Param>& headers) {
  kiwi::Request r;
  r.method = "GET";
  r.headers = headers;
  return r;
}
}  // namespace

TEST_CASE("metric check: Prometheus name rules, the SDK's units, finite values") {
  using kiwi::MetricKind;
  using kiwi::Unit;
  auto row = [](std::string_view name, Unit unit = Unit::none,
                MetricKind kind = MetricKind::gauge) -> kiwi::MetricSpec {
    return {name, unit, kind, "", ""};
  };
  auto ok = [&](std::string_view name, std::vector<kiwi::Label> labels = {}, Unit unit = Unit::none,
                double v = 1) { return !check_metric(row(name, unit), labels, v); };
  CHECK(ok("cpu_usage_ratio", {}, Unit::ratio));
  CHECK(ok("_private"));
  CHECK(ok("network_receive_bytes_per_second", {{"interface", "eth0"}}, Unit::bytes_per_second));
  CHECK(ok("diskio_reads_per_second", {{"device", "sda"}}, Unit::per_second));
  CHECK(ok("hwmon_volts", {{"chip", "it8613"}}, Unit::volts));  // ABI 1.5's four
  CHECK(ok("hwmon_amperes", {}, Unit::amperes));
  CHECK(ok("hwmon_watts", {}, Unit::watts));
  CHECK(ok("hwmon_fan_rpm", {}, Unit::rpm));
  CHECK(ok("x", {{"path", "a \"quoted\" \\ back\nslash"}}));  // any label value: escaped on output
  CHECK_FALSE(ok("chaos bad name"));
  CHECK_FALSE(ok("9starts_with_digit"));
  CHECK_FALSE(ok(""));
  CHECK_FALSE(ok("colon:name"));
  CHECK_FALSE(ok("x", {{"bad-label", "1"}}));
  CHECK_FALSE(ok("x", {{"__name__", "1"}}));
  CHECK_FALSE(ok("x", {{"a", "1"}, {"a", "2"}}));
  CHECK_FALSE(ok("x", {}, static_cast<Unit>(99)));
  CHECK_FALSE(ok("x", {}, Unit::none, std::nan("")));
  CHECK_FALSE(ok("x", {}, Unit::none, INFINITY));
  CHECK(check_metric(row("x", Unit::none, static_cast<MetricKind>(7)), {}, 1) ==
        "\"x\": unknown metric kind 7");
  CHECK(*check_metric(row("x", static_cast<Unit>(99)), {}, 1) ==
        "\"x\": unit code 99 is not a known unit (bytes, seconds, celsius, hertz, ratio, count, "
        "bytes_per_second, per_second, volts, amperes, watts, rpm or none)");
  // A hostile name is quoted short and escaped: no newline or raw byte reaches a message.
  std::string hostile = "bad\nname\xff" + std::string(200, 'x');
  auto why = *check_metric(row(hostile), {}, 1);
  CHECK(why.find('\n') == std::string::npos);
  CHECK_THAT(why, Catch::StartsWith("\"bad\\x0aname\\xff") &&
                      Catch::Contains("xxx\"...(209 bytes): not a valid metric name"));
  CHECK(why.size() < 250);
}

TEST_CASE(
    "metric check: a histogram's or summary's series is named as its part, with a bound Prometheus "
    "reads") {
  using kiwi::MetricKind;
  auto check = [](std::string_view name, MetricKind kind, std::vector<kiwi::Label> labels = {}) {
    return check_metric({name, kiwi::Unit::none, kind, "", ""}, labels, 1);
  };
  const auto H = MetricKind::histogram, S = MetricKind::summary;
  CHECK_FALSE(check("rpc_seconds_bucket", H, {{"le", "0.005"}}));
  CHECK_FALSE(check("rpc_seconds_bucket", H, {{"code", "200"}, {"le", "+Inf"}}));
  CHECK_FALSE(check("rpc_seconds_bucket", H, {{"le", "1e-05"}}));
  CHECK_FALSE(check("rpc_seconds_sum", H));
  CHECK_FALSE(check("rpc_seconds_count", H));
  CHECK_FALSE(check("gc_seconds", S, {{"quantile", "0.5"}}));
  CHECK_FALSE(check("gc_seconds_sum", S));
  CHECK_FALSE(check("gc_seconds_count", S));
  // A bucket without its bound, a bound that is not one, a name that is no part of a family.
  CHECK(*check("rpc_seconds_bucket", H) ==
        "\"rpc_seconds_bucket\": a histogram's series is <family>_bucket with a label le, "
        "<family>_sum or <family>_count");
  CHECK(check("rpc_seconds", H));
  CHECK(check("rpc_seconds_sum", H, {{"le", "1"}}));
  CHECK(check("_bucket", H, {{"le", "1"}}));
  CHECK(*check("rpc_seconds_bucket", H, {{"le", "fast"}}) ==
        "\"rpc_seconds_bucket\": label le=\"fast\" is not a bucket bound (a number or +Inf)");
  CHECK(check("rpc_seconds_bucket", H, {{"le", "+1"}}));
  CHECK(check("rpc_seconds_bucket", H, {{"le", ""}}));
  CHECK(check("gc_seconds", S));
  CHECK(check("gc_seconds", S, {{"quantile", "1.5"}}));
  CHECK(check("gc_seconds", S, {{"quantile", "+Inf"}}));
  CHECK(*check("gc_seconds", S) ==
        "\"gc_seconds\": a summary's series is <family> with a label quantile, <family>_sum or "
        "<family>_count");
}

TEST_CASE(
    "metric check: the sink keeps what passes, drops repeats of a series, names what it dropped") {
  using kiwi::Label;
  auto row = [](std::string_view name, std::string_view labels = "",
                kiwi::Unit unit = kiwi::Unit::none) -> kiwi::MetricSpec {
    return {name, unit, kiwi::MetricKind::gauge, labels, ""};
  };
  std::vector<kiwi::MetricValue> out;
  CheckedSink sink(out);
  sink.emit(row("ok"), 1);
  sink.emit(row("chaos bad name"), 2);
  sink.emit(row("twice", "a,b"), {"1", "2"}, 5);
  const Label reordered[] = {{"b", "2"}, {"a", "1"}};
  sink.emit(row("twice"), reordered, 6);           // the same series, labels reordered
  sink.emit(row("twice", "a, b"), {"1", "3"}, 7);  // another series
  sink.emit(row("ok", "x"), {"1"}, 8);
  sink.emit(row("ok"), 9);
  sink.emit(row("nan"), std::nan(""));
  std::string note = sink.finish();
  REQUIRE(out.size() == 4);
  CHECK(out[0].name == "ok");
  CHECK(out[0].value == 1);  // the first of a repeated series is kept
  CHECK(out[1].value == 5);
  CHECK(out[2].value == 7);
  CHECK(out[3].value == 8);
  CHECK(sink.dropped() == 4);
  CHECK_THAT(note, Catch::StartsWith(
                       "dropped 4 invalid metrics: \"chaos bad name\": not a valid metric name"));
  CHECK_THAT(note, Catch::Contains("\"nan\": value is not a finite number"));
  CHECK_THAT(note, Catch::EndsWith("; ..."));  // three shown, the count says the rest

  std::vector<kiwi::MetricValue> clean;
  CheckedSink good(clean);
  good.emit(row("a", "", kiwi::Unit::bytes), 1);
  good.emit(row("a", "core", kiwi::Unit::ratio), {"0"}, 1);
  CHECK(good.finish().empty());
  REQUIRE(clean.size() == 2);
  CHECK(clean[0].unit == "bytes");
  CHECK(clean[1].labels == std::vector<std::pair<std::string, std::string>>{{"core", "0"}});
  CHECK(clean[1].unit == "ratio");
}

TEST_CASE("metric sink: label values and messages become valid UTF-8, each bad byte U+FFFD") {
  // The one rule (kiwi/io.hpp, to_valid_utf8), applied where the host takes in what a plugin
  // gives: JSON and the Prometheus exposition both require UTF-8.
  CHECK(kiwi::to_valid_utf8("mnt-\xff\xfe-\"quote") == "mnt-\uFFFD\uFFFD-\"quote");
  CHECK(kiwi::to_valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") ==
        "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");                  // valid text as it is
  CHECK(kiwi::to_valid_utf8("\xc3") == "\uFFFD");                      // cut short
  CHECK(kiwi::to_valid_utf8("\xc0\xaf") == "\uFFFD\uFFFD");            // overlong '/'
  CHECK(kiwi::to_valid_utf8("\xed\xa0\x80") == "\uFFFD\uFFFD\uFFFD");  // a surrogate
  CHECK(kiwi::to_valid_utf8("\xf4\x90\x80\x80") == "\uFFFD\uFFFD\uFFFD\uFFFD");  // > U+10FFFF
  CHECK(kiwi::to_valid_utf8(std::string("a\0b", 3)) == std::string("a\0b", 3));
  CHECK(kiwi::is_valid_utf8("\xef\xbf\xbd"));
  CHECK_FALSE(kiwi::is_valid_utf8("\xfe"));

  const kiwi::MetricSpec row{"m", kiwi::Unit::none, kiwi::MetricKind::gauge, "path", ""};
  std::vector<kiwi::MetricValue> out;
  CheckedSink sink(out);
  sink.emit(row, {"mnt-\xff\xfe-\"quote"}, 1e308);
  CHECK(sink.finish().empty());
  REQUIRE(out.size() == 1);
  CHECK(out[0].labels[0].second == "mnt-\uFFFD\uFFFD-\"quote");
  CHECK(out[0].value == 1e308);  // finite: kept as it is

  struct Rude : kiwi::Sensor {
    kiwi::SampleResult sample(kiwi::MetricSink&) override {
      return kiwi::SampleResult::ok("read \xff\xfe and " + std::string(100000, 'x'));
    }
  } rude;
  RateDeriver rates;
  auto call = call_sensor(rude, rates, "/nonexistent");
  CHECK(kiwi::is_valid_utf8(call.message));
  CHECK_THAT(call.message, Catch::StartsWith("read \uFFFD\uFFFD and xxx") &&
                               Catch::EndsWith("xxx...(100016 bytes)"));
  CHECK(call.message.size() < 16 * 1024 + 32);
}

TEST_CASE("metric sink: label values go with the row's label names, and must match them") {
  std::vector<kiwi::MetricValue> out;
  CheckedSink sink(out);
  const kiwi::MetricSpec two{"x", kiwi::Unit::none, kiwi::MetricKind::gauge, "mode, core", ""};
  sink.emit(two, {"idle", "3"}, 1);
  REQUIRE(out.size() == 1);
  CHECK(out[0].labels ==
        std::vector<std::pair<std::string, std::string>>{{"mode", "idle"}, {"core", "3"}});
  CHECK_THROWS_WITH(sink.emit(two, {"idle"}, 1),
                    "metric x declares labels \"mode, core\" but was emitted with 1 label values");
  CHECK_THROWS_WITH(sink.emit(two, 1),
                    "metric x declares labels \"mode, core\" but was emitted with 0 label values");
  const kiwi::MetricSpec none{"y", kiwi::Unit::none, kiwi::MetricKind::gauge, "", ""};
  CHECK_THROWS_WITH(sink.emit(none, {"extra"}, 1),
                    "metric y declares labels \"\" but was emitted with 1 label values");
  const kiwi::MetricSpec many{"z", kiwi::Unit::none, kiwi::MetricKind::gauge, "a,b,c,d,e,f,g,h,i,j",
                              ""};
  sink.emit(many, {"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"}, 2);  // more than the stack
  REQUIRE(out.size() == 2);
  CHECK(out[1].labels.size() == 10);
  CHECK(out[1].labels[9] == std::pair<std::string, std::string>{"j", "10"});
  CHECK(sink.finish().empty());
}

TEST_CASE("http: If-None-Match matches lists, weak tags and * (RFC 9110 13.1.2)") {
  CHECK(kiwi::etag_matches("\"23\"", "\"23\""));
  CHECK(kiwi::etag_matches("\"1\", \"23\"", "\"23\""));
  CHECK(kiwi::etag_matches("\"1\",\"23\"", "\"23\""));
  CHECK(kiwi::etag_matches("W/\"23\"", "\"23\""));
  CHECK(kiwi::etag_matches("\"23\"", "W/\"23\""));
  CHECK(kiwi::etag_matches("*", "\"23\""));
  CHECK(kiwi::etag_matches("\"a,b\", \"23\"", "\"23\""));  // a comma inside a tag
  CHECK_FALSE(kiwi::etag_matches("\"2\"", "\"23\""));
  CHECK_FALSE(kiwi::etag_matches("\"1\", \"2\"", "\"23\""));
  CHECK_FALSE(kiwi::etag_matches("23", "\"23\""));  // not a quoted tag
  CHECK_FALSE(kiwi::etag_matches("", "\"23\""));
}

TEST_CASE("http: Accept-Encoding gzip in any case, refused only with q=0") {
  auto gz = [](std::string_view value) {
    std::vector<kiwi::Param> h = {{"accept-encoding", value}};
    return with_header(h).accepts_gzip();
  };
  CHECK(gz("gzip"));
  CHECK(gz("GZIP"));
  CHECK(gz("Gzip, deflate"));
  CHECK(gz("deflate, gzip;q=0.5"));
  CHECK(gz("br ,  gzip ; q=1"));
  CHECK(gz("x-gzip"));
  CHECK_FALSE(gz("gzip;q=0"));
  CHECK_FALSE(gz("gzip; q=0.000"));
  CHECK_FALSE(gz("deflate"));
  CHECK_FALSE(gz("gzipx"));
  CHECK_FALSE(gz("identity"));
  CHECK_FALSE(with_header({}).accepts_gzip());
}
