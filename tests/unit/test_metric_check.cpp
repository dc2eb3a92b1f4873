// What a sensor emits is checked in one place before it goes anywhere (issue 11, item 6), and
// the small HTTP rules every route shares: conditional requests and gzip negotiation (item 11).
#include <catch2/catch.hpp>
#include <cmath>

#include "metric_check.hpp"

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
  auto ok = [](std::string_view name, std::vector<kiwi::Label> labels = {},
               std::string_view unit = "", double v = 1) {
    return !check_metric(name, labels, v, unit, kiwi::MetricKind::gauge);
  };
  CHECK(ok("cpu_usage_ratio", {}, "ratio"));
  CHECK(ok("_private"));
  CHECK(ok("network_receive_bytes_per_second", {{"interface", "eth0"}}, "bytes_per_second"));
  CHECK(ok("diskio_reads_per_second", {{"device", "sda"}}, "per_second"));
  CHECK(ok("x", {{"path", "a \"quoted\" \\ back\nslash"}}));  // any label value: escaped on output
  CHECK_FALSE(ok("chaos bad name"));
  CHECK_FALSE(ok("9starts_with_digit"));
  CHECK_FALSE(ok(""));
  CHECK_FALSE(ok("colon:name"));
  CHECK_FALSE(ok("x", {{"bad-label", "1"}}));
  CHECK_FALSE(ok("x", {{"__name__", "1"}}));
  CHECK_FALSE(ok("x", {{"a", "1"}, {"a", "2"}}));
  CHECK_FALSE(ok("x", {}, "furlongs"));
  CHECK_FALSE(ok("x", {}, "", std::nan("")));
  CHECK_FALSE(ok("x", {}, "", INFINITY));
  CHECK(check_metric("x", {}, 1, "", static_cast<kiwi::MetricKind>(7)) ==
        "\"x\": unknown metric kind");
  CHECK(*check_metric("x", {}, 1, "furlongs", kiwi::MetricKind::gauge) ==
        "\"x\": unit \"furlongs\" is not one of bytes, seconds, celsius, hertz, ratio, count, "
        "bytes_per_second, per_second or \"\"");
  // A hostile name is quoted short and escaped: no newline or raw byte reaches a message.
  std::string hostile = "bad\nname\xff" + std::string(200, 'x');
  auto why = *check_metric(hostile, {}, 1, "", kiwi::MetricKind::gauge);
  CHECK(why.find('\n') == std::string::npos);
  CHECK_THAT(why, Catch::StartsWith("\"bad\\x0aname\\xff") && Catch::Contains("...:"));
  CHECK(why.size() < 200);
}

TEST_CASE(
    "metric check: the sink keeps what passes, drops repeats of a series, names what it dropped") {
  std::vector<kiwi::MetricValue> out;
  CheckedSink sink(out);
  sink.gauge("ok", 1, "");
  sink.gauge("chaos bad name", 2, "");
  sink.gauge("twice", {{"a", "1"}, {"b", "2"}}, 5, "");
  sink.gauge("twice", {{"b", "2"}, {"a", "1"}}, 6, "");  // the same series, labels reordered
  sink.gauge("twice", {{"a", "1"}, {"b", "3"}}, 7, "");  // another series
  sink.gauge("ok", {{"x", "1"}}, 8, "");
  sink.gauge("ok", 9, "");
  sink.gauge("nan", std::nan(""), "");
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
  good.gauge("a", 1, "bytes");
  good.gauge("a", {{"core", "0"}}, 1, "ratio");
  CHECK(good.finish().empty());
  CHECK(clean.size() == 2);
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
