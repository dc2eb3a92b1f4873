// /api/history details on the real agent (issue 11, item 12): `limit` with `step` counts buckets
// that hold data, bucket labels never precede the data, times relative to now, and 400s for
// times that are not plausible.
#include <catch2/catch.hpp>

#include "checks.hpp"

using namespace kiwi_test;
using namespace std::chrono_literals;

namespace {

std::vector<double> timestamps_of(const rapidjson::Document& d) {
  std::vector<double> out;
  for (auto& t : d["timestamps"].GetArray()) out.push_back(t.GetDouble());
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
