// /api/fleet's rows (fleet_row) and /peer/<name>/'s paths (peer_path), on the pure functions; the
// handlers themselves run against real agents in tests/integration/test_fleet.cpp.
#include <rapidjson/document.h>

#include <catch2/catch.hpp>
#include <cmath>

#include "fleet_row.hpp"
#include "peer_path.hpp"

namespace {

kiwi::MetricValue metric(std::string name, double value,
                         std::vector<std::pair<std::string, std::string>> labels = {}) {
  kiwi::MetricValue m;
  m.name = std::move(name);
  m.value = value;
  m.labels = std::move(labels);
  return m;
}

kiwi::SensorReport report(std::string name) {
  kiwi::SensorReport r;
  r.name = name;
  r.plugin = std::move(name);
  return r;
}

kiwi::Snapshot board() {
  kiwi::Snapshot s;
  s.sequence = 9;
  s.timestamp = 1000.0;
  s.stale_after_seconds = 3;
  s.host = "kiwi1";
  s.agent_version = "0.9.0";
  kiwi::SensorReport cpu = report("cpu");
  cpu.metrics = {metric("cpu_usage_ratio", 0.25),
                 metric("cpu_core_usage_ratio", 0.9, {{"core", "0"}})};
  kiwi::SensorReport thermal = report("thermal");
  thermal.metrics = {metric("thermal_celsius", 48.5, {{"sensor", "gpu-thermal"}}),
                     metric("thermal_celsius", 61.25, {{"sensor", "cpu-thermal"}}),
                     metric("thermal_celsius", NAN, {{"sensor", "broken"}})};
  kiwi::SensorReport memory = report("memory");
  memory.metrics = {metric("memory_used_ratio", 0.5)};
  kiwi::SensorReport storage = report("storage");
  storage.metrics = {metric("storage_used_ratio", 0.3, {{"mount", "/"}}),
                     metric("storage_used_ratio", 0.875, {{"mount", "/data"}})};
  kiwi::SensorReport power = report("power");
  power.metrics = {
      metric("power_throttle_flag", 0, {{"flag", "under_voltage"}, {"when", "now"}}),
      metric("power_throttle_flag", 1, {{"flag", "under_voltage"}, {"when", "since_boot"}}),
      metric("power_throttle_flag", 1, {{"flag", "frequency_capped"}, {"when", "now"}})};
  s.sensors = {cpu, thermal, memory, storage, power};
  return s;
}

kiwi_fleet::RowMeta meta(std::string_view name, std::string_view status, std::string_view url = {},
                         std::string_view error = {}, std::optional<double> seen = {}) {
  kiwi_fleet::RowMeta m;
  m.name = name;
  m.self = url.empty();
  m.url = url;
  m.status = status;
  m.error = error;
  m.last_seen_ms = seen;
  return m;
}

kiwi::Alert alert(std::string name, kiwi::AlertState state) {
  kiwi::Alert a;
  a.name = std::move(name);
  a.state = state;
  return a;
}

}  // namespace

TEST_CASE(
    "fleet: a board's row holds its CPU, hottest zone, memory, fullest filesystem, power and "
    "firing alerts",
    "[fleet]") {
  const std::vector<kiwi::Alert> alerts = {
      alert("soc_hot", kiwi::AlertState::firing), alert("disk_full", kiwi::AlertState::firing),
      alert("disk_full", kiwi::AlertState::firing), alert("memory_low", kiwi::AlertState::pending)};
  const auto v = kiwi_fleet::board_values(board(), alerts, 1'000'500);
  CHECK(v.host == "kiwi1");
  CHECK(v.cpu_ratio == 0.25);
  REQUIRE(v.temperature);
  CHECK(v.temperature->celsius == 61.25);
  CHECK(v.temperature->zone == "cpu-thermal");
  CHECK(v.memory_ratio == 0.5);
  REQUIRE(v.filesystem);
  CHECK(v.filesystem->mount == "/data");
  CHECK(v.filesystem->used_ratio == 0.875);
  REQUIRE(v.power);
  CHECK_FALSE(v.power->under_voltage);  // only since boot
  CHECK(v.power->throttled);            // frequency capped now
  CHECK(v.firing == 3);                 // instances; names once each, sorted
  CHECK(v.alert_names == std::vector<std::string>{"disk_full", "soc_hot"});
  CHECK(v.age_ms == 500);
  CHECK_FALSE(v.stale);

  SECTION("a sample older than stale_after is stale") {
    CHECK(kiwi_fleet::board_values(board(), alerts, 1'003'500).stale);
  }
  SECTION("a board without such sensors has nulls, not zeros") {
    kiwi::Snapshot bare = board();
    bare.sensors.clear();
    std::string out;
    const auto b = kiwi_fleet::board_values(bare, {}, 1'000'100);
    kiwi_fleet::append_row(out, meta("vm", "up"), &b);
    rapidjson::Document d;
    d.Parse(out.c_str());
    REQUIRE_FALSE(d.HasParseError());
    CHECK(d["cpu_ratio"].IsNull());
    CHECK(d["temperature"].IsNull());
    CHECK(d["filesystem"].IsNull());
    CHECK(d["power"].IsNull());
    CHECK(d["alerts"]["firing"].GetInt() == 0);
  }
}

TEST_CASE(
    "fleet: a row written and read back is the same row, and a never-reached peer's values are "
    "null",
    "[fleet]") {
  const std::vector<kiwi::Alert> alerts = {alert("soc_hot", kiwi::AlertState::firing)};
  const auto v = kiwi_fleet::board_values(board(), alerts, 1'000'200);
  std::string out = "{\"boards\":[";
  kiwi_fleet::append_row(out, meta("kiwi1", "up", {}, {}, 1e6), &v);
  out += "]}";
  std::string why;
  const auto back = kiwi_fleet::parse_self_answer(out, why);
  REQUIRE(back);
  CHECK(back->host == v.host);
  CHECK(back->cpu_ratio == v.cpu_ratio);
  CHECK(back->temperature->celsius == v.temperature->celsius);
  CHECK(back->temperature->zone == v.temperature->zone);
  CHECK(back->filesystem->mount == "/data");
  CHECK(back->power->throttled);
  CHECK(back->alert_names == v.alert_names);
  CHECK(back->age_ms == 200);
  CHECK_FALSE(back->stale);

  std::string never;
  kiwi_fleet::append_row(
      never, meta("barn", "unreachable", "http://barn:8095", "no answer within 2 s"), nullptr);
  rapidjson::Document d;
  d.Parse(never.c_str());
  REQUIRE_FALSE(d.HasParseError());
  CHECK(d["last_seen_ms"].IsNull());
  CHECK(d["cpu_ratio"].IsNull());
  CHECK(std::string(d["error"].GetString()) == "no answer within 2 s");
}

TEST_CASE(
    "fleet: a peer's answer is checked member by member: wrong types are left out, texts and lists "
    "cut",
    "[fleet]") {
  std::string why;
  CHECK_FALSE(kiwi_fleet::parse_self_answer("<html>", why));
  CHECK(why == "its answer is not JSON");
  CHECK_FALSE(kiwi_fleet::parse_self_answer("{\"boards\":[]}", why));
  CHECK_FALSE(kiwi_fleet::parse_self_answer("{\"error\":{}}", why));

  std::string names;
  for (int i = 0; i < 50; ++i) names += (i ? ",\"" : "\"") + std::to_string(i) + "\"";
  const std::string hostile = "{\"boards\":[{\"host\":\"" + std::string(1000, 'x') +
                              "\",\"status\":\"up\",\"cpu_ratio\":\"high\",\"memory_ratio\":0.5,"
                              "\"temperature\":{\"celsius\":\"hot\"},\"power\":[1],"
                              "\"alerts\":{\"firing\":-4,\"names\":[" +
                              names + ",7]}}]}";
  const auto v = kiwi_fleet::parse_self_answer(hostile, why);
  REQUIRE(v);
  CHECK(v->host.size() == kiwi_fleet::kMaxText);
  CHECK_FALSE(v->cpu_ratio);
  CHECK(v->memory_ratio == 0.5);
  CHECK_FALSE(v->temperature);
  CHECK_FALSE(v->power);
  CHECK(v->firing == 0);
  CHECK(v->alert_names.size() == kiwi_fleet::kMaxAlertNames);
}

TEST_CASE("peer: a /peer/<name>/ path names a peer and a path under its root, nothing else",
          "[fleet]") {
  using kiwi_proxy::resolve;
  auto target = [](std::string_view path, std::string_view query = {}) {
    auto r = resolve(path, "/peer/", query);
    REQUIRE(std::holds_alternative<kiwi_proxy::Target>(r));
    return std::get<kiwi_proxy::Target>(r);
  };
  CHECK(target("/peer/barn/").name == "barn");
  CHECK(target("/peer/barn/").path_and_query == "/");
  CHECK(target("/peer/barn/api/history", "series=cpu_*&since=-60").path_and_query ==
        "/api/history?series=cpu_*&since=-60");
  CHECK(target("/peer/barn/a b/ü").path_and_query == "/a%20b/%C3%BC");
  CHECK(target("/peer/barn//api//current").path_and_query == "//api//current");

  auto redirect = resolve("/peer/barn", "/peer/", "");
  REQUIRE(std::holds_alternative<kiwi_proxy::Redirect>(redirect));
  CHECK(std::get<kiwi_proxy::Redirect>(redirect).location == "barn/");

  auto refused = [](std::string_view path, std::string_view query = {}) {
    auto r = resolve(path, "/peer/", query);
    REQUIRE(std::holds_alternative<kiwi_proxy::Refused>(r));
    return std::get<kiwi_proxy::Refused>(r).status;
  };
  CHECK(refused("/peer/") == 404);
  CHECK(refused("/peer/barn/../../etc/passwd") == 400);
  CHECK(refused("/peer/barn/..") == 400);
  CHECK(refused("/peer/barn/./api") == 400);
  CHECK(refused("/peer/barn/a\r\nHost: evil") == 400);
  CHECK(refused("/peer/barn/", "a=1#frag") == 400);
  CHECK(refused("/peer/barn/", "a=1 HTTP/1.1") == 400);
}
