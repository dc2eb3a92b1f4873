// /api/history details on the real agent (issue 11, item 12): `limit` with `step` counts buckets
// that hold data, bucket labels never precede the data, times relative to now, and 400s for
// times that are not plausible. Issue 39: the min-max band and CSV.
#include <catch2/catch.hpp>
#include <tuple>

#include "checks.hpp"

using namespace kiwi_test;
using namespace std::chrono_literals;

namespace {

std::vector<double> timestamps_of(const rapidjson::Document& d) {
  std::vector<double> out;
  for (auto& t : d["timestamps"].GetArray()) out.push_back(t.GetDouble());
  return out;
}

// The fields of a CSV line as RFC 4180 reads them (quoted fields with doubled quotes).
std::vector<std::string> csv_fields(std::string_view line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"')
      out.back().push_back('"'), ++i;
    else if (c == '"')
      quoted = !quoted;
    else if (c == ',' && !quoted)
      out.emplace_back();
    else
      out.back().push_back(c);
  }
  return out;
}

// The lines of a CSV body, each ended by CRLF.
std::vector<std::string> csv_lines(const std::string& body) {
  std::vector<std::string> out;
  std::size_t at = 0;
  for (std::size_t end; (end = body.find("\r\n", at)) != std::string::npos; at = end + 2)
    out.push_back(body.substr(at, end - at));
  CHECK(at == body.size());  // nothing after the last CRLF
  return out;
}

}  // namespace

TEST_CASE("history details: step=0.5&limit=3 on 1 Hz samples gives the latest 3 samples") {
  Agent agent;
  HttpClient c(agent.port());
  REQUIRE(eventually([&] { return sequence_of(c) >= 5; }, 20s));
  auto r = c.get("/api/history?step=0.5&limit=3&series=cpu_usage_ratio");
  REQUIRE(r.status == 200);
  auto d = parse_json(r.body);
  INFO(r.body);
  CHECK(d["count"].GetUint() == 3);
  auto ts = timestamps_of(d);
  REQUIRE(ts.size() == 3);
  // Each half-second bucket holds one sample and is labelled with it: 1 s apart (or more, if a
  // tick was skipped on a busy machine), on the samples' whole seconds.
  CHECK(ts[1] - ts[0] >= 1);
  CHECK(ts[2] - ts[1] >= 1);
  for (double t : ts) CHECK(t == std::floor(t));
  // Those are the newest samples: nothing newer than them existed when it was answered.
  auto raw = parse_json(c.get("/api/history?limit=1&until=" + std::to_string(ts[2] + 0.5)).body);
  CHECK(timestamps_of(raw) == std::vector<double>{ts[2]});
}

TEST_CASE(
    "history details: a negative since is seconds before now, relative windows are not cached") {
  Agent agent;
  HttpClient c(agent.port());
  REQUIRE(eventually([&] { return sequence_of(c) >= 6; }, 20s));
  // The agent takes "now" between `before` and `after`. Asked at a moment when the agent's history
  // holds two samples within 2.5 s of `after` (on a busy machine the collector may be a tick
  // behind the clock: then again at its next tick), both must be in the answer.
  std::vector<double> ticks, ts;
  double before = 0, after = 0;
  std::string body;
  REQUIRE(eventually(
      [&] {
        ticks = timestamps_of(
            parse_json(c.get("/api/history?limit=86400&series=cpu_usage_ratio").body));
        before = now_seconds();
        auto r = c.get("/api/history?since=-2.5&series=cpu_usage_ratio");
        after = now_seconds();
        REQUIRE(r.status == 200);
        body = r.body;
        ts = timestamps_of(parse_json(body));
        return std::count_if(ticks.begin(), ticks.end(),
                             [&](double t) { return t >= after - 2.5; }) >= 2;
      },
      20s));
  INFO(body);
  for (double t : ticks)
    if (t >= after - 2.5) CHECK(std::find(ts.begin(), ts.end(), t) != ts.end());
  // 2.5 s of 1 Hz samples: 2 or 3 (each stamped with a boundary the wall clock had reached when
  // it was taken), never the agent's whole history (which a 1970 since gave).
  CHECK(ts.size() >= 2);
  CHECK(ts.size() <= 3);
  for (double t : ts) CHECK(t >= before - 2.5 - 0.001);
  // A window that ends before now but is relative slides with the clock: revalidated every time.
  auto closed_relative = c.get("/api/history?since=-4&until=-1.5");
  REQUIRE(closed_relative.status == 200);
  CHECK(closed_relative.header("cache-control") == "no-cache");
  // With a step, the first bucket is labelled with the agent's first sample, not the minute
  // (or step) boundary before it.
  auto all = parse_json(c.get("/api/history?limit=86400&series=cpu_usage_ratio").body);
  auto stepped = parse_json(c.get("/api/history?step=60&since=-3600&series=cpu_usage_ratio").body);
  REQUIRE(stepped["count"].GetUint() >= 1);
  CHECK(stepped["timestamps"][0].GetDouble() == all["timestamps"][0].GetDouble());
}

TEST_CASE("history details: implausible times are a 400 naming the parameter") {
  Agent agent;
  HttpClient c(agent.port());
  auto error_of = [&](const std::string& target) {
    auto r = c.get(target);
    INFO(target << " -> " << r.body);
    CHECK(r.status == 400);
    auto d = parse_json(r.body);
    return std::pair<std::string, std::string>{d["error"]["parameter"].GetString(),
                                               d["error"]["message"].GetString()};
  };
  auto [p1, m1] = error_of("/api/history?since=1e9");
  CHECK(p1 == "since");
  CHECK_THAT(m1, Catch::Contains("is not a time; use unix seconds"));
  auto [p2, m2] = error_of("/api/history?until=1764475800000");
  CHECK(p2 == "until");
  CHECK_THAT(m2, Catch::Contains("is out of range"));
  // '+' sent unencoded in the query arrives as a space: the message says to write %2B.
  auto [p3, m3] = error_of("/api/history?since=2026-11-30T06:00:00+01:00");
  CHECK(p3 == "since");
  CHECK_THAT(m3, Catch::Contains("write '+' as %2B"));
  // Encoded as %2B, the offset arrives as '+' and the time is taken.
  CHECK(c.get("/api/history?since=2020-01-01T06:00:00%2B01:00").status == 200);
}

TEST_CASE("history details: JSON and CSV of one window, with its band, hold the same numbers") {
  Agent agent;
  HttpClient c(agent.port());
  REQUIRE(eventually([&] { return sequence_of(c) >= 8; }, 30s));
  auto all = parse_json(c.get("/api/history?limit=86400&series=cpu_usage_ratio").body);
  auto ticks = timestamps_of(all);
  REQUIRE(ticks.size() >= 8);
  // A closed window of whole samples: neither answer can change between the two requests.
  const std::string window = "since=" + std::to_string(static_cast<long long>(ticks.front())) +
                             "&until=" + std::to_string(static_cast<long long>(ticks.back()) - 1) +
                             "&step=3&series=cpu_usage_ratio,cpu_mode_ratio,memory_*";
  auto json = c.get("/api/history?" + window + "&band=true");
  REQUIRE(json.status == 200);
  CHECK(json.header("content-type") == "application/json");
  auto csv = c.get("/api/history?" + window + "&band=1&format=csv");
  REQUIRE(csv.status == 200);
  CHECK(csv.header("content-type") == "text/csv; charset=utf-8");
  INFO(json.body << "\n" << csv.body);
  CHECK(csv.header("etag") != json.header("etag"));
  CHECK(csv.header("cache-control") == "max-age=3600");
  CHECK(c.get("/api/history?" + window + "&format=csv&band=true").header("etag") ==
        csv.header("etag"));  // another spelling, one rendering
  const auto again = c.get("/api/history?" + window + "&band=1&format=csv");  // from the cache
  CHECK(again.header("content-type") == "text/csv; charset=utf-8");
  CHECK(again.body == csv.body);
  const auto plain = c.get("/api/history?" + window + "&format=csv");
  CHECK(plain.header("etag") != csv.header("etag"));  // no band: another rendering

  auto d = parse_json(json.body);
  auto lines = csv_lines(csv.body);
  const auto ts = timestamps_of(d);
  REQUIRE(ts.size() >= 2);
  REQUIRE(lines.size() == ts.size() + 1);
  // The header: timestamp, then each series of the JSON, in its order, with its min and max.
  std::vector<std::string> header = {"timestamp"};
  std::vector<const rapidjson::Value*> columns;
  bool labelled = false;
  for (auto& m : d["series"].GetObject()) {
    const std::string key = m.name.GetString();
    labelled = labelled || key.find('"') != std::string::npos;
    for (const char* part : {"values", "min", "max"}) {
      REQUIRE(m.value.HasMember(part));
      REQUIRE(m.value[part].Size() == ts.size());
      header.push_back(part == std::string("values") ? key : key + ":" + part);
      columns.push_back(&m.value[part]);
    }
  }
  CHECK(labelled);  // a key with quotes went through the CSV quoting
  CHECK(columns.size() >= 9);
  CHECK(csv_fields(lines[0]) == header);
  // Row by row: the same timestamps and numbers, empty where JSON has null; each value within
  // its band.
  std::size_t values = 0;
  for (std::size_t row = 0; row < ts.size(); ++row) {
    const auto fields = csv_fields(lines[row + 1]);
    REQUIRE(fields.size() == header.size());
    CHECK(std::stod(fields[0]) == ts[row]);
    for (std::size_t i = 0; i < columns.size(); ++i) {
      const rapidjson::Value& v = (*columns[i])[static_cast<rapidjson::SizeType>(row)];
      INFO("row " << row << ", column " << header[i + 1]);
      if (v.IsNull()) {
        CHECK(fields[i + 1].empty());
        continue;
      }
      REQUIRE_FALSE(fields[i + 1].empty());
      CHECK(std::stod(fields[i + 1]) == v.GetDouble());
      ++values;
    }
    for (std::size_t i = 0; i < columns.size(); i += 3) {
      const rapidjson::Value& v = (*columns[i])[static_cast<rapidjson::SizeType>(row)];
      const rapidjson::Value& lo = (*columns[i + 1])[static_cast<rapidjson::SizeType>(row)];
      const rapidjson::Value& hi = (*columns[i + 2])[static_cast<rapidjson::SizeType>(row)];
      CHECK(v.IsNull() == lo.IsNull());
      CHECK(v.IsNull() == hi.IsNull());
      if (v.IsNull()) continue;
      CHECK(lo.GetDouble() <= v.GetDouble());
      CHECK(v.GetDouble() <= hi.GetDouble());
    }
  }
  CHECK(values >= ts.size() * 3);
  // Without a band the CSV has the values' columns only, the same numbers.
  const auto plain_lines = csv_lines(plain.body);
  REQUIRE(plain_lines.size() == lines.size());
  const auto plain_fields = csv_fields(plain_lines[1]);
  const auto band_fields = csv_fields(lines[1]);
  REQUIRE(plain_fields.size() == 1 + columns.size() / 3);
  for (std::size_t i = 1; i < plain_fields.size(); ++i)
    CHECK(plain_fields[i] == band_fields[1 + 3 * (i - 1)]);
}

TEST_CASE("history details: a band without a step or a format it has not is a 400 naming it") {
  Agent agent;
  HttpClient c(agent.port());
  for (auto [target, parameter, message] :
       {std::tuple{"/api/history?band=true", "band", "only applies with step"},
        std::tuple{"/api/history?step=60&band=yes", "band",
                   "'yes' is not a boolean; use true, 1, false or 0"},
        std::tuple{"/api/history?format=xml", "format", "'xml' is not a format; use json or csv"},
        std::tuple{"/api/history?format=csv&band=1", "band", "only applies with step"}}) {
    auto r = c.get(target);
    INFO(target << " -> " << r.body);
    CHECK(r.status == 400);
    CHECK(r.header("content-type") == "application/json");
    auto d = parse_json(r.body);
    CHECK(d["error"]["parameter"].GetString() == std::string(parameter));
    CHECK(d["error"]["message"].GetString() == std::string(message));
  }
}
