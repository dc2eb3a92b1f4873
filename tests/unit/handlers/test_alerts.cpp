// /api/alerts: the filter's rules and the JSON on the pure functions, then the built plugin
// (kiwi-handler-alerts.so) through the C ABI, reading the agent's own AgentData with its
// alert_list hook set as the agent sets it.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <set>

#include "alerts_render.hpp"
#include "app/agent_data.hpp"
#include "plugin/plugin_loader.hpp"

using kiwi_alerts::Filter;
using kiwi_alerts::ParamError;

namespace {

using Params = std::vector<std::pair<std::string, std::string>>;

std::variant<Filter, ParamError> parse(const Params& params) {
  std::vector<kiwi::Param> p;
  for (auto& [k, v] : params) p.push_back({k, v});
  kiwi::Request req;
  req.query = p;
  return kiwi_alerts::parse_filter(req);
}

Filter ok(const Params& params) {
  auto r = parse(params);
  if (auto* e = std::get_if<ParamError>(&r)) FAIL(e->parameter + ": " + e->message);
  return std::get<Filter>(r);
}

ParamError bad(const Params& params) {
  auto r = parse(params);
  REQUIRE(std::holds_alternative<ParamError>(r));
  return std::get<ParamError>(r);
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Three instances as the engine lists them (firing first): a temperature over its threshold, a
// sensor's status (no labels, no value, no threshold) and a resolved filesystem.
std::vector<kiwi::Alert> sample_alerts() {
  kiwi::Alert hot;
  hot.name = "soc_hot";
  hot.labels = {{"sensor", "soc-thermal"}};
  hot.sensor = "thermal";
  hot.series = "thermal_celsius{sensor=\"soc-thermal\"}";
  hot.state = kiwi::AlertState::firing;
  hot.severity = kiwi::Severity::critical;
  hot.summary = "soc-thermal at 85.5 °C";
  hot.value = 85.5;
  hot.threshold = 80;
  hot.since = 1764475800;
  hot.active_at = 1764475740.5;
  kiwi::Alert failing;
  failing.name = "sensor_failing";
  failing.sensor = "gpu";
  failing.series = "gpu";
  failing.state = kiwi::AlertState::pending;
  failing.severity = kiwi::Severity::warning;
  failing.summary = "sensor gpu: \"exit 1\"";
  failing.value = kNaN;
  failing.threshold = kNaN;
  failing.since = 1764475790;
  failing.active_at = 1764475790;
  kiwi::Alert full;
  full.name = "filesystem_full";
  full.labels = {{"mount", "/"}};
  full.sensor = "storage";
  full.series = "storage_used_ratio{mount=\"/\"}";
  full.state = kiwi::AlertState::resolved;
  full.severity = kiwi::Severity::info;
  full.summary = "/ is 89 % full";
  full.value = 0.89125;
  full.threshold = 0.9;
  full.since = 1764475000;
  full.active_at = 0;
  return {hot, failing, full};
}

// Each instance's JSON, as docs/api.md shows it.
const std::string kHot =
    R"({"name":"soc_hot","state":"firing","severity":"critical","summary":"soc-thermal at 85.5 °C",)"
    R"("labels":{"sensor":"soc-thermal"},"sensor":"thermal","series":"thermal_celsius{sensor=\"soc-thermal\"}",)"
    R"("value":85.5,"threshold":80,"since":1764475800,"active_at":1764475740.5})";
const std::string kFailing =
    R"({"name":"sensor_failing","state":"pending","severity":"warning","summary":"sensor gpu: \"exit 1\"",)"
    R"("labels":{},"sensor":"gpu","series":"gpu","value":null,"threshold":null,"since":1764475790,)"
    R"("active_at":1764475790})";
const std::string kFull =
    R"({"name":"filesystem_full","state":"resolved","severity":"info","summary":"/ is 89 % full",)"
    R"("labels":{"mount":"/"},"sensor":"storage","series":"storage_used_ratio{mount=\"/\"}",)"
    R"("value":0.89125,"threshold":0.9,"since":1764475000,"active_at":null})";
const std::string kHead =
    R"({"version":1,"timestamp":1764475801,"firing":1,"pending":1,"alerts":[)";

}  // namespace

TEST_CASE("alerts params: without parameters every state and severity is listed") {
  const Filter f = ok({});
  for (const auto& a : sample_alerts()) CHECK(f.matches(a));
}

TEST_CASE("alerts params: state and severity take comma lists of their words") {
  const auto alerts = sample_alerts();
  Filter f = ok({{"state", "firing,resolved"}});
  CHECK(f.matches(alerts[0]));
  CHECK_FALSE(f.matches(alerts[1]));
  CHECK(f.matches(alerts[2]));
  f = ok({{"severity", "warning"}});
  CHECK_FALSE(f.matches(alerts[0]));
  CHECK(f.matches(alerts[1]));
  CHECK_FALSE(f.matches(alerts[2]));
  f = ok({{"state", "pending,firing"}, {"severity", "critical,info"}});
  CHECK(f.matches(alerts[0]));
  CHECK_FALSE(f.matches(alerts[1]));  // pending, but a warning
  CHECK_FALSE(f.matches(alerts[2]));  // info, but resolved
  // One response per filter: every filter its own slot.
  std::set<std::size_t> slots;
  for (const char* state : {"firing", "pending", "resolved", "firing,pending", "pending,resolved",
                            "firing,resolved", "firing,pending,resolved"})
    for (const char* severity :
         {"info", "warning", "critical", "info,warning", "warning,critical", "info,critical"}) {
      const std::size_t slot = ok({{"state", state}, {"severity", severity}}).slot();
      CHECK(slot < Filter::kSlots);
      CHECK(slots.insert(slot).second);
    }
  CHECK(ok({}).slot() == ok({{"state", "resolved,pending,firing"}}).slot());
}

TEST_CASE("alerts params: each bad parameter is a 400 that names it and says what is accepted") {
  auto e = bad({{"state", "hot"}});
  CHECK(e.parameter == "state");
  CHECK(e.message == "'hot' is not a state; use firing, pending or resolved (a comma list)");
  e = bad({{"state", "inactive"}});  // never listed: not a filter either
  CHECK(e.message == "'inactive' is not a state; use firing, pending or resolved (a comma list)");
  e = bad({{"severity", "Critical"}});
  CHECK(e.parameter == "severity");
  CHECK(e.message == "'Critical' is not a severity; use critical, warning or info (a comma list)");
  e = bad({{"state", "firing,,pending"}});
  CHECK(e.parameter == "state");
  CHECK(e.message == "empty item in the list");
  CHECK(bad({{"severity", "warning,"}}).message == "empty item in the list");
  e = bad({{"state", ""}});
  CHECK(e.message == "is empty; give a value or leave the parameter out");
  e = bad({{"state", "firing"}, {"state", "pending"}});
  CHECK(e.parameter == "state");
  CHECK(e.message == "given more than once");
  e = bad({{"limit", "10"}});
  CHECK(e.parameter == "limit");
  CHECK(e.message == "unknown parameter; accepted: state, severity");
}

TEST_CASE("alerts render: every member of each instance, NaN and no active time as null") {
  const auto alerts = sample_alerts();
  CHECK(kiwi_alerts::render(alerts, Filter{}, 1764475801) ==
        kHead + kHot + "," + kFailing + "," + kFull + "]}");
}

TEST_CASE("alerts render: a filter drops instances but the counts are of all of them") {
  const auto alerts = sample_alerts();
  CHECK(kiwi_alerts::render(alerts, ok({{"state", "resolved"}}), 1764475801) ==
        kHead + kFull + "]}");
  CHECK(kiwi_alerts::render(alerts, ok({{"severity", "critical"}, {"state", "pending"}}),
                            1764475801) == kHead + "]}");
  CHECK(kiwi_alerts::render({}, Filter{}, 0) ==
        R"({"version":1,"timestamp":null,"firing":0,"pending":0,"alerts":[]})");
}

TEST_CASE(
    "alerts handler: the built plugin serves the agent's alerts, 400s, and one body per change") {
  using namespace kiwi::agent;
  struct Log final : kiwi::Logger {
    void log(kiwi::LogLevel, std::string_view) override {}
  } log;
  SnapshotHolder holder;
  auto snap = std::make_shared<kiwi::Snapshot>();
  snap->sequence = 9;
  snap->timestamp = 1764475801;
  holder.publish(snap);
  AgentData data(holder, nullptr);
  PluginLoader loader(KIWI_PLUGIN_DIR, log);
  PluginEntry e;
  e.plugin = "alerts";
  e.path = "/api/alerts";
  auto handler = loader.create_handler(e, data, "0.3.0");
  auto get = [&](const Params& params) {
    std::vector<kiwi::Param> p;
    for (auto& [k, v] : params) p.push_back({k, v});
    kiwi::Request req;
    req.method = "GET";
    req.path = "/api/alerts";
    req.query = p;
    return handler.object->handle(req);
  };

  // No rule engine (an agent without [[alert]] rules): none, and no error.
  kiwi::Response r = get({});
  CHECK(r.status == 200);
  CHECK(r.content_type == "application/json");
  CHECK(*r.body == R"({"version":1,"timestamp":1764475801,"firing":0,"pending":0,"alerts":[]})");

  auto alerts = sample_alerts();
  data.alert_list = [&] { return alerts; };
  r = get({});
  CHECK(*r.body == kHead + kHot + "," + kFailing + "," + kFull + "]}");
  const auto header = [](const kiwi::Response& res, std::string_view name) {
    for (auto& h : res.headers)
      if (h.name == name) return h.value;
    return std::string();
  };
  CHECK(header(r, "Cache-Control") == "no-cache");
  const std::string etag = header(r, "ETag");
  CHECK(etag.size() == 19);
  // Nothing changed: the same body (the server's gzip of it is made once) and ETag.
  kiwi::Response again = get({});
  CHECK(again.body.identity() == r.body.identity());
  CHECK(header(again, "ETag") == etag);
  // Another filter: its own body.
  kiwi::Response firing = get({{"state", "firing"}});
  CHECK(*firing.body == kHead + kHot + "]}");
  CHECK(header(firing, "ETag") != etag);
  // A change: a new body and ETag.
  alerts[1].state = kiwi::AlertState::firing;
  kiwi::Response changed = get({});
  CHECK(header(changed, "ETag") != etag);
  CHECK_THAT(std::string(*changed.body),
             Catch::StartsWith(R"({"version":1,"timestamp":1764475801,"firing":2,"pending":0,)"));

  kiwi::Response refused = get({{"severity", "fatal"}});
  CHECK(refused.status == 400);
  CHECK(*refused.body ==
        R"j({"error":{"status":400,"parameter":"severity","message":"'fatal' is not a severity; )j"
        R"j(use critical, warning or info (a comma list)"}})j");
}
