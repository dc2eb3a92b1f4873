// Every /api/history parameter rule, on the pure parser.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "history_render.hpp"

namespace {

const std::vector<std::string> kSeries = {
    "cpu_usage_ratio",
    "cpu_core_usage_ratio{core=\"0\"}",
    "thermal_celsius{sensor=\"soc-thermal\"}",
    "memory_used_bytes",
    "power_throttle_flag{flag=\"under_voltage\",when=\"now\"}",
    "storage_used_ratio{mount=\"/mnt/a,b}\\\"\"}"};
constexpr double kNow = 1'764'475'800;

struct Query {
  std::vector<std::pair<std::string, std::string>> params;
  std::variant<kiwi_history::ParsedQuery, kiwi_history::ParamError> run() const {
    std::vector<kiwi::Param> p;
    for (auto& [k, v] : params) p.push_back({k, v});
    kiwi::Request req;
    req.query = p;
    return kiwi_history::parse_query(req, kNow, kSeries);
  }
};

kiwi::HistoryQuery ok(std::vector<std::pair<std::string, std::string>> params) {
  auto r = Query{std::move(params)}.run();
  if (auto* e = std::get_if<kiwi_history::ParamError>(&r)) FAIL(e->parameter + ": " + e->message);
  return std::get<kiwi_history::ParsedQuery>(r).query;
}

kiwi_history::ParamError bad(std::vector<std::pair<std::string, std::string>> params) {
  auto r = Query{std::move(params)}.run();
  REQUIRE(std::holds_alternative<kiwi_history::ParamError>(r));
  return std::get<kiwi_history::ParamError>(r);
}

}  // namespace

TEST_CASE("history params: defaults are the latest 120 samples of every series") {
  auto q = ok({});
  CHECK(q.limit == 120);
  CHECK_FALSE(q.since);
  CHECK(q.step == 0);
  CHECK(q.patterns.empty());
}

TEST_CASE("history params: without series= the handler's default_series apply, * means all") {
  std::vector<kiwi::Param> none;
  kiwi::Request req;
  req.query = none;
  auto r = kiwi_history::parse_query(req, kNow, kSeries, {"cpu_usage_ratio", "memory_*"});
  CHECK(std::get<kiwi_history::ParsedQuery>(r).query.patterns ==
        std::vector<std::string>{"cpu_usage_ratio", "memory_*"});
  auto all = kiwi_history::parse_query(req, kNow, kSeries, {"*"});
  CHECK(std::get<kiwi_history::ParsedQuery>(all).query.patterns.empty());
}

TEST_CASE("history params: since and until take unix seconds or RFC 3339") {
  auto q = ok({{"since", "1764470000"}, {"until", "2025-11-30T04:10:00.5+01:00"}});
  CHECK(*q.since == 1764470000);
  CHECK(*q.until == Approx(1764472200.5));
  CHECK(q.limit == 86400);  // a window returns everything in it unless limited
  CHECK(*kiwi_history::parse_time("2025-11-30T04:10:00Z") == 1764475800);
  for (auto badtime : {"yesterday", "2025-11-30", "2025-13-01T00:00:00Z", "2025-11-30T04:10:00",
                       "1e400", "nan", "+5", "1e9", "-5", "0x10", "1764475800.", ".5", "inf"})
    CHECK_FALSE(kiwi_history::parse_time(badtime).has_value());
}

TEST_CASE("history params: step downsamples a window, and needs no since") {
  auto q = ok({{"step", "86.4"}, {"since", "1764389400"}, {"agg", "max"}});
  CHECK(q.step == 86.4);
  CHECK(q.aggregate == kiwi::Aggregate::max);
  CHECK(*q.until == kNow);
  auto back = ok({{"step", "60"}, {"limit", "30"}});
  CHECK_FALSE(back.since);  // the latest 30 buckets with data: the store finds how far back
  CHECK(back.limit == 30);
}

TEST_CASE("history params: step with limit and no since counts buckets, not a window of steps") {
  // step=0.5&limit=3 on 1 Hz samples: a window of 3 steps (1.5 s) held 1 sample; now the store
  // gets no since and returns the latest 3 buckets that hold data.
  auto q = ok({{"step", "0.5"}, {"limit", "3"}});
  CHECK_FALSE(q.since);
  CHECK(*q.until == kNow);
  CHECK(q.limit == 3);
  CHECK(ok({{"step", "0.5"}}).limit == 10000);
}

TEST_CASE("history params: negative since and until are seconds before now") {
  auto q = ok({{"since", "-300"}, {"until", "-60.5"}});
  CHECK(*q.since == kNow - 300);
  CHECK(*q.until == kNow - 60.5);
  CHECK(*ok({{"since", "-0"}}).since == kNow);
  auto stepped = ok({{"since", "-3600"}, {"step", "4"}});
  CHECK(*stepped.since == kNow - 3600);
  CHECK(*stepped.until == kNow);
  // A relative window is flagged: the same URL names a later window later (never cached as closed).
  auto r = Query{{{"until", "-60"}}}.run();
  CHECK(std::get<kiwi_history::ParsedQuery>(r).relative);
  CHECK_FALSE(std::get<kiwi_history::ParsedQuery>(Query{{{"since", "1764470000"}}}.run()).relative);
  CHECK(bad({{"since", "-60"}, {"until", "-120"}}).message == "since is after until");
}

TEST_CASE("history params: absolute times lie between 2000 and a day from now") {
  CHECK(*ok({{"since", "946684800"}}).since == 946684800);
  CHECK(*ok({{"until", "1764562200"}}).until == kNow + 86400);
  CHECK(*ok({{"until", "2000-01-01T00:00:00Z"}}).until == 946684800);
  const std::string range =
      " is out of range: a time must lie between 2000-01-01T00:00:00Z (946684800) and a day from "
      "now; give unix seconds (not milliseconds), or negative seconds for a time before now (-300)";
  auto e = bad({{"since", "5"}});
  CHECK(e.parameter == "since");
  CHECK(e.message == "'5'" + range);
  CHECK(bad({{"until", "1764475800000"}}).message == "'1764475800000'" + range);  // milliseconds
  CHECK(bad({{"until", "1764562201"}}).message == "'1764562201'" + range);
  CHECK(bad({{"since", "1970-01-01T00:00:00Z"}}).message == "'1970-01-01T00:00:00Z'" + range);
  CHECK(bad({{"since", "-999999999999"}}).message ==
        "'-999999999999' reaches back before 2000-01-01T00:00:00Z");
  const std::string forms =
      " is not a time; use unix seconds (1764475800), RFC 3339 (2026-11-30T05:00:00Z) or negative "
      "seconds before now (-300)";
  for (auto text : {"1e9", "-1e3", "-", "--5", "+1764475800", "1764475800s"}) {
    auto err = bad({{"since", text}});
    CHECK(err.parameter == "since");
    CHECK(err.message == "'" + std::string(text) + "'" + forms);
  }
}

TEST_CASE("history params: a space in a time (an unencoded '+') gets a hint to write %2B") {
  const std::string hint =
      " is not a time: it has a space, which is what a '+' sent unencoded in a URL becomes; write "
      "'+' as %2B (2026-11-30T06:00:00%2B01:00)";
  auto e = bad({{"until", "2025-11-30T06:00:00 01:00"}});
  CHECK(e.parameter == "until");
  CHECK(e.message == "'2025-11-30T06:00:00 01:00'" + hint);
  CHECK(bad({{"since", "2025-11-30 04:00:00.5 01:00"}}).message ==
        "'2025-11-30 04:00:00.5 01:00'" + hint);
  CHECK(bad({{"since", " 1764470000"}}).message == "' 1764470000'" + hint);
  // A space for the 'T' is RFC 3339's own allowance, and '+' encoded as %2B arrives as '+'.
  CHECK(*ok({{"since", "2025-11-30 04:00:00+01:00"}}).since == kNow - 4200);
}

TEST_CASE("history params: series takes names, keys and globs, checked against the store") {
  auto q = ok({{"series", "cpu_*,thermal_celsius,memory_used_bytes"}});
  CHECK(q.patterns == std::vector<std::string>{"cpu_*", "thermal_celsius", "memory_used_bytes"});
  CHECK(bad({{"series", "gpu_usage"}}).message ==
        "'gpu_usage' matches no series; see /api/current for names");
  CHECK(ok({{"series", "gpu_*"}}).patterns ==
        std::vector<std::string>{"gpu_*"});  // not running here
  CHECK(bad({{"series", "cpu_*,,x"}}).message == "empty name in the list");
}

TEST_CASE("history params: a key with several labels, or commas in a label value, is one item") {
  const std::string flag = "power_throttle_flag{flag=\"under_voltage\",when=\"now\"}";
  const std::string mount = "storage_used_ratio{mount=\"/mnt/a,b}\\\"\"}";
  CHECK(ok({{"series", flag}}).patterns == std::vector<std::string>{flag});
  CHECK(ok({{"series", "cpu_usage_ratio," + flag + "," + mount + ",memory_*"}}).patterns ==
        std::vector<std::string>{"cpu_usage_ratio", flag, mount, "memory_*"});
  // Split at the label's comma, neither half is a series: the old parser's 400.
  CHECK(bad({{"series", "power_throttle_flag{flag=\"x\""}}).parameter == "series");
}

TEST_CASE("history params: every bad parameter is a 400 naming it") {
  struct Case {
    std::vector<std::pair<std::string, std::string>> params;
    std::string parameter, message;
  };
  const Case cases[] = {
      {{{"lmit", "5"}},
       "lmit",
       "unknown parameter; accepted: limit, since, until, step, agg, series, band, format"},
      {{{"limit", "abc"}}, "limit", "'abc' is not an integer; expected an integer from 1 to 86400"},
      {{{"limit", "0"}}, "limit", "0 is out of range; expected an integer from 1 to 86400"},
      {{{"limit", "86401"}}, "limit", "86401 is out of range; expected an integer from 1 to 86400"},
      {{{"limit", ""}}, "limit", "is empty; give a value or leave the parameter out"},
      {{{"limit", "5"}, {"limit", "6"}}, "limit", "given more than once"},
      {{{"since", "soon"}},
       "since",
       "'soon' is not a time; use unix seconds (1764475800), RFC 3339 (2026-11-30T05:00:00Z) or "
       "negative seconds before now (-300)"},
      {{{"until", "x"}},
       "until",
       "'x' is not a time; use unix seconds (1764475800), RFC 3339 (2026-11-30T05:00:00Z) or "
       "negative seconds before now (-300)"},
      {{{"since", "1764470200"}, {"until", "1764470100"}}, "since", "since is after until"},
      {{{"step", "0"}}, "step", "'0' must be more than 0 seconds"},
      {{{"step", "-5"}}, "step", "'-5' must be more than 0 seconds"},
      {{{"step", "1m"}}, "step", "'1m' is not a number of seconds"},
      {{{"step", "1"}, {"since", "-20000"}},
       "step",
       "the window holds 20000 steps of 1 s; at most 10000 points per response, use a larger step"},
      {{{"step", "60"}, {"limit", "10001"}},
       "limit",
       "10001 is out of range; expected an integer from 1 to 10000"},
      {{{"agg", "max"}}, "agg", "only applies with step"},
      {{{"step", "5"}, {"agg", "median"}},
       "agg",
       "'median' is not an aggregate; use mean, max, min or last"},
      {{{"band", "true"}}, "band", "only applies with step"},
      {{{"band", "0"}, {"since", "-60"}}, "band", "only applies with step"},
      {{{"step", "60"}, {"band", "yes"}},
       "band",
       "'yes' is not a boolean; use true, 1, false or 0"},
      {{{"step", "60"}, {"band", ""}}, "band", "is empty; give a value or leave the parameter out"},
      {{{"format", "xml"}}, "format", "'xml' is not a format; use json or csv"},
      {{{"format", "CSV"}}, "format", "'CSV' is not a format; use json or csv"},
      {{{"format", "csv"}, {"format", "json"}}, "format", "given more than once"},
  };
  for (auto& c : cases) {
    auto e = bad(c.params);
    INFO(c.parameter << ": " << c.message);
    CHECK(e.parameter == c.parameter);
    CHECK(e.message == c.message);
  }
}

TEST_CASE("history params: band and format, each in the canonical query (never one rendering)") {
  auto parsed = [](std::vector<std::pair<std::string, std::string>> params) {
    return std::get<kiwi_history::ParsedQuery>(Query{std::move(params)}.run());
  };
  const auto plain = parsed({{"step", "60"}});
  CHECK_FALSE(plain.query.band);
  CHECK(plain.format == kiwi_history::Format::json);
  for (auto word : {"true", "1"}) CHECK(parsed({{"step", "60"}, {"band", word}}).query.band);
  for (auto word : {"false", "0"}) CHECK_FALSE(parsed({{"step", "60"}, {"band", word}}).query.band);
  const auto csv = parsed({{"step", "60"}, {"format", "csv"}});
  CHECK(csv.format == kiwi_history::Format::csv);
  CHECK(parsed({{"format", "json"}}).format == kiwi_history::Format::json);
  const auto band = parsed({{"step", "60"}, {"band", "1"}});
  const auto both = parsed({{"step", "60"}, {"band", "true"}, {"format", "csv"}});
  CHECK(parsed({{"step", "60"}, {"band", "false"}}).canonical == plain.canonical);
  CHECK(parsed({{"step", "60"}, {"format", "json"}}).canonical == plain.canonical);
  CHECK(parsed({{"band", "true"}, {"step", "60"}}).canonical == band.canonical);
  const std::string keys[] = {plain.canonical, csv.canonical, band.canonical, both.canonical};
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = i + 1; j < 4; ++j) CHECK(keys[i] != keys[j]);
  CHECK(kiwi_history::content_type(kiwi_history::Format::csv) == "text/csv; charset=utf-8");
  CHECK(kiwi_history::content_type(kiwi_history::Format::json) == "application/json");
}

namespace {
// Two buckets of a ratio and a key with quotes and a comma, each with its band; the second
// series has no value in the second bucket.
kiwi::HistoryResult banded() {
  kiwi::HistoryResult r;
  r.timestamps = {1764475800, 1764475860.5};
  r.series.push_back({"cpu_usage_ratio",
                      "cpu_usage_ratio",
                      {},
                      "ratio",
                      kiwi::MetricKind::gauge,
                      {0.123456, 0.5},
                      {0.1, 0.25},
                      {0.2, 0.75}});
  r.series.push_back({"storage_used_ratio{mount=\"/mnt/a,b\"}",
                      "storage_used_ratio",
                      {{"mount", "/mnt/a,b"}},
                      "bytes",
                      kiwi::MetricKind::gauge,
                      {1000.4, std::nan("")},
                      {999, std::nan("")},
                      {1002, std::nan("")}});
  return r;
}
}  // namespace

TEST_CASE("history render: with band, min and max beside values, null where values is") {
  kiwi::HistoryQuery q;
  q.step = 60;
  q.band = true;
  const std::string body = kiwi_history::render(banded(), q);
  CHECK_THAT(body, Catch::Contains("\"unit\":\"ratio\",\"values\":[0.1235,0.5],\"min\":[0.1,0.25],"
                                   "\"max\":[0.2,0.75]}"));
  CHECK_THAT(body, Catch::Contains("\"values\":[1000,null],\"min\":[999,null],"
                                   "\"max\":[1002,null]}"));
  q.band = false;
  CHECK_THAT(kiwi_history::render(banded(), q), !Catch::Contains("\"min\""));
  // An agent before ABI 1.7 answers no band: all null, one per value.
  kiwi::HistoryResult old = banded();
  for (auto& s : old.series) s.min.clear(), s.max.clear();
  q.band = true;
  CHECK_THAT(kiwi_history::render(old, q),
             Catch::Contains("\"values\":[0.1235,0.5],\"min\":[null,null],\"max\":[null,null]}"));
}

TEST_CASE("history render: CSV has a header of keys, quoted as RFC 4180 says, a row a timestamp") {
  kiwi::HistoryQuery q;
  q.step = 60;
  CHECK(kiwi_history::render_csv(banded(), q) ==
        "timestamp,cpu_usage_ratio,\"storage_used_ratio{mount=\"\"/mnt/a,b\"\"}\"\r\n"
        "1764475800,0.1235,1000\r\n"
        "1764475860.5,0.5,\r\n");
  q.band = true;
  CHECK(kiwi_history::render_csv(banded(), q) ==
        "timestamp,cpu_usage_ratio,cpu_usage_ratio:min,cpu_usage_ratio:max,"
        "\"storage_used_ratio{mount=\"\"/mnt/a,b\"\"}\",\"storage_used_ratio{mount=\"\"/mnt/"
        "a,b\"\"}:min\","
        "\"storage_used_ratio{mount=\"\"/mnt/a,b\"\"}:max\"\r\n"
        "1764475800,0.1235,0.1,0.2,1000,999,1002\r\n"
        "1764475860.5,0.5,0.25,0.75,,,\r\n");
  CHECK(kiwi_history::render_csv({}, q) == "timestamp\r\n");
  // A key with only quotes is quoted too (a label value without commas).
  kiwi::HistoryResult one;
  one.timestamps = {1};
  one.series.push_back({"t{zone=\"soc\"}",
                        "t",
                        {{"zone", "soc"}},
                        "celsius",
                        kiwi::MetricKind::gauge,
                        {std::numeric_limits<double>::infinity()}});
  CHECK(kiwi_history::render_csv(one, {}) == "timestamp,\"t{zone=\"\"soc\"\"}\"\r\n1,\r\n");
}

TEST_CASE("history render: columns with units, nulls for gaps, values rounded for their unit") {
  kiwi::HistoryResult r;
  r.timestamps = {1764475799, 1764475800};
  r.series.push_back({"cpu_usage_ratio",
                      "cpu_usage_ratio",
                      {},
                      "ratio",
                      kiwi::MetricKind::gauge,
                      {0.123456, std::nan("")}});
  r.series.push_back({"thermal_celsius{sensor=\"soc\"}",
                      "thermal_celsius",
                      {{"sensor", "soc"}},
                      "celsius",
                      kiwi::MetricKind::gauge,
                      {45.123, 46.0}});
  r.series.push_back({"memory_used_bytes",
                      "memory_used_bytes",
                      {},
                      "bytes",
                      kiwi::MetricKind::gauge,
                      {8300695552.4, 1}});
  CHECK(kiwi_history::render(r, {}) ==
        "{\"version\":1,\"count\":2,\"timestamps\":[1764475799,1764475800],\"series\":{"
        "\"cpu_usage_ratio\":{\"name\":\"cpu_usage_ratio\",\"unit\":\"ratio\",\"values\":[0.1235,"
        "null]},"
        "\"thermal_celsius{sensor=\\\"soc\\\"}\":{\"name\":\"thermal_celsius\",\"labels\":{"
        "\"sensor\":"
        "\"soc\"},\"unit\":\"celsius\",\"values\":[45.12,46]},"
        "\"memory_used_bytes\":{\"name\":\"memory_used_bytes\",\"unit\":\"bytes\",\"values\":"
        "[8300695552,1]}}}");
  kiwi::HistoryQuery q;
  q.step = 60;
  q.aggregate = kiwi::Aggregate::max;
  CHECK_THAT(kiwi_history::render(r, q),
             Catch::StartsWith("{\"version\":1,\"count\":2,\"step\":60,\"agg\":\"max\","));
}

TEST_CASE("history render: volts, amperes and watts to the milli, rpm whole (ABI 1.5's units)") {
  // A float32 of the store comes back as 3.3440001010894775 V: shown as the millivolts hwmon gave.
  kiwi::HistoryResult r;
  r.timestamps = {1764475800};
  for (const char* unit : {"volts", "amperes", "watts", "rpm"})
    r.series.push_back({unit,
                        unit,
                        {},
                        unit,
                        kiwi::MetricKind::gauge,
                        {static_cast<double>(static_cast<float>(3.344))}});
  const std::string body = kiwi_history::render(r, {});
  for (const char* unit : {"volts", "amperes", "watts"}) {
    INFO(unit);
    CHECK_THAT(body, Catch::Contains(std::string("\"unit\":\"") + unit + "\",\"values\":[3.344]"));
  }
  CHECK_THAT(body, Catch::Contains("\"unit\":\"rpm\",\"values\":[3]"));
}

TEST_CASE("history render: a value whose rounding overflows is printed finite, not left out") {
  // 1e308 * 10^6 is infinity: the rounded value was infinite and RapidJSON wrote nothing for it
  // (`"values":[,`). Large values have no fraction to round away; they are printed as they are.
  kiwi::HistoryResult r;
  r.timestamps = {1764475800};
  for (double v : {1e308, -1e308, 1.7976931348623157e308}) {
    const std::string key = "big" + std::to_string(r.series.size());
    r.series.push_back({key, "big", {}, "", kiwi::MetricKind::gauge, {v}});
  }
  const std::string body = kiwi_history::render(r, {});
  CHECK_THAT(body, Catch::Contains("\"values\":[1e308]") &&
                       Catch::Contains("\"values\":[-1e308]") &&
                       Catch::Contains("\"values\":[1.7976931348623157e308]"));
  CHECK_THAT(body, !Catch::Contains("[,") && !Catch::Contains("[]"));
}

TEST_CASE("history render: a value near DBL_MAX is a number, an infinity null, never nothing") {
  // 1e308 overflowed when scaled for rounding, and RapidJSON wrote nothing for the infinity it
  // became: `"values":[,0.5]`, a body no JSON parser accepts.
  kiwi::HistoryResult r;
  r.timestamps = {1764475799, 1764475800, 1764475801, 1764475802};
  r.series.push_back({"x_ratio",
                      "x_ratio",
                      {},
                      "ratio",
                      kiwi::MetricKind::gauge,
                      {1e308, 0.5, -1.5e300, std::numeric_limits<double>::infinity()}});
  r.series.push_back(
      {"big_bytes", "big_bytes", {}, "bytes", kiwi::MetricKind::gauge, {1e16, 1e21, 2.5, 1e-7}});
  CHECK(kiwi_history::render(r, {}) ==
        "{\"version\":1,\"count\":4,\"timestamps\":[1764475799,1764475800,1764475801,1764475802],"
        "\"series\":{\"x_ratio\":{\"name\":\"x_ratio\",\"unit\":\"ratio\",\"values\":[1e308,0.5,"
        "-1.5e300,null]},\"big_bytes\":{\"name\":\"big_bytes\",\"unit\":\"bytes\",\"values\":"
        "[10000000000000000.0,1e21,2,0]}}}");
}
