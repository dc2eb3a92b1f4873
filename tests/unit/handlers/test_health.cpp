// /api/health: the verdict and its JSON on the pure function (health_render), then the built
// plugin through the C ABI on the agent's own AgentData, with the hooks of the alert engine and
// the notifiers set as the agent sets them.
#include <catch2/catch.hpp>

#include "app/agent_data.hpp"
#include "health_render.hpp"
#include "plugin/plugin_loader.hpp"

namespace {

constexpr double kNow = 1764475800;

kiwi::Snapshot live() {
  kiwi::Snapshot s;
  s.sequence = 5;
  s.timestamp = kNow - 0.5;
  s.stale_after_seconds = 3;
  return s;
}

kiwi::AgentStats counters() {
  kiwi::AgentStats s;
  s.started_at = kNow - 100;
  return s;
}

kiwi::NotifierStatus notifier(std::string name, std::string state) {
  kiwi::NotifierStatus n;
  n.name = std::move(name);
  n.kind = "ntfy";
  n.state = std::move(state);
  return n;
}

std::string between(const std::string& body, const std::string& from, const std::string& to) {
  const auto a = body.find(from);
  REQUIRE(a != std::string::npos);
  const auto b = body.find(to, a);
  REQUIRE(b != std::string::npos);
  return body.substr(a, b - a);
}

}  // namespace

TEST_CASE("health: alerts firing or pending are counted, and do not change the verdict") {
  kiwi::AgentStats stats = counters();
  auto h = kiwi_health::check(live(), stats, kNow);
  CHECK(h.status == 200);
  CHECK_THAT(h.body, Catch::StartsWith(R"({"status":"ok",)"));
  CHECK_THAT(h.body,
             Catch::Contains(R"("alerts":{"firing":0,"pending":0},"notifiers":[],"reasons":[]})"));
  stats.alerts_firing = 2;
  stats.alerts_pending = 1;
  h = kiwi_health::check(live(), stats, kNow);
  CHECK(h.status == 200);
  // The board is hot, the agent is fine: an alert is the board's state, not the agent's health.
  CHECK_THAT(h.body, Catch::StartsWith(R"({"status":"ok",)"));
  CHECK_THAT(h.body, Catch::Contains(R"("alerts":{"firing":2,"pending":1})"));
}

TEST_CASE(
    "health: each notifier with its queue, and one retrying makes the agent degraded, with why") {
  kiwi::AgentStats stats = counters();
  kiwi::NotifierStatus am = notifier("am", "retrying");
  am.kind = "alertmanager";
  am.queued = 3;
  am.sent_total = 12;
  am.failures_total = 4;
  am.dropped_total = 1;
  am.last_sent_at = kNow - 60.25;
  am.last_error = "connection refused by 127.0.0.1:9093";
  am.last_error_at = kNow - 2;
  stats.notifiers = {am, notifier("phone", "idle")};
  auto h = kiwi_health::check(live(), stats, kNow);
  CHECK(h.status == 200);
  CHECK_THAT(h.body, Catch::StartsWith(R"({"status":"degraded",)"));
  CHECK(between(h.body, R"("notifiers":)", R"(,"reasons")") ==
        R"("notifiers":[{"name":"am","kind":"alertmanager","state":"retrying","queued":3,)"
        R"("sent_total":12,"failures_total":4,"dropped_total":1,"last_sent_at":1764475739.75,)"
        R"("last_error":"connection refused by 127.0.0.1:9093",)"
        R"("last_error_at":1764475798},{"name":"phone","kind":"ntfy","state":"idle","queued":0,)"
        R"("sent_total":0,"failures_total":0,"dropped_total":0,"last_sent_at":0,"last_error":"",)"
        R"("last_error_at":0}])");
  CHECK_THAT(h.body, Catch::EndsWith(R"("reasons":["notifier am: retrying, 3 queued: )"
                                     R"(connection refused by 127.0.0.1:9093"]})"));

  SECTION("sending or idle is healthy") {
    stats.notifiers[0].state = "sending";
    h = kiwi_health::check(live(), stats, kNow);
    CHECK_THAT(h.body, Catch::StartsWith(R"({"status":"ok",)"));
  }
  SECTION("a failure of the agent still makes it failing, the notifier's reason after it") {
    stats.store_failing_writes = 2;
    stats.store_last_error = "disk full";
    h = kiwi_health::check(live(), stats, kNow);
    CHECK(h.status == 503);
    CHECK_THAT(h.body, Catch::StartsWith(R"({"status":"failing",)"));
    CHECK_THAT(h.body, Catch::Contains(R"(disk full","notifier am: retrying, 3 queued)"));
  }
}

TEST_CASE("health: the built plugin reads the alert counts and notifiers through the C ABI") {
  using namespace kiwi::agent;
  struct Log final : kiwi::Logger {
    void log(kiwi::LogLevel, std::string_view) override {}
  } log;
  SnapshotHolder holder;
  auto snap = std::make_shared<kiwi::Snapshot>(live());
  snap->timestamp = unix_now();  // the plugin reads the clock
  holder.publish(snap);
  AgentData data(holder, nullptr);
  data.started_at = unix_now() - 10;
  PluginLoader loader(KIWI_PLUGIN_DIR, log);
  PluginEntry e;
  e.plugin = "health";
  e.path = "/api/health";
  auto handler = loader.create_handler(e, data, "0.3.0");
  kiwi::Request req;
  req.method = "GET";
  req.path = "/api/health";

  std::string body(*handler.object->handle(req).body);
  CHECK_THAT(body, Catch::Contains(R"("alerts":{"firing":0,"pending":0},"notifiers":[])"));

  std::vector<kiwi::Alert> alerts(4);
  alerts[0].state = alerts[1].state = kiwi::AlertState::firing;
  alerts[2].state = kiwi::AlertState::pending;
  alerts[3].state = kiwi::AlertState::resolved;
  data.alert_list = [&] { return alerts; };
  data.notifier_status = [] {
    return std::vector<kiwi::NotifierStatus>{notifier("phone", "retrying")};
  };
  kiwi::Response r = handler.object->handle(req);
  body = std::string(*r.body);
  CHECK(r.status == 200);
  CHECK_THAT(body, Catch::StartsWith(R"({"status":"degraded",)"));
  CHECK_THAT(
      body,
      Catch::Contains(
          R"("alerts":{"firing":2,"pending":1},"notifiers":[{"name":"phone","kind":"ntfy","state":"retrying",)"));
  CHECK_THAT(body, Catch::EndsWith(R"("reasons":["notifier phone: retrying, 0 queued"]})"));
}
