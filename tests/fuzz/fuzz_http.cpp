// The HTTP request path after libmicrohttpd: the router of the default config's routes, their
// handlers loaded from the real plugin modules (as the agent loads them), answering a request
// made from the fuzz input (http_request.hpp: method, path, query, headers, body). The data is a
// fixed snapshot and history with the edge cases (a non-UTF-8 label, 1e308, NaN). Every request
// gets a response with a status and a body; a handler that throws is the server's 500, so an
// exception escapes only as a finding.
#include <cmath>
#include <limits>
#include <memory>

#include "base/log.hpp"
#include "config/config.hpp"
#include "fuzz_support.hpp"
#include "http/router.hpp"
#include "http_request.hpp"
#include "plugin/plugin_loader.hpp"

using namespace kiwi;
using namespace kiwi::agent;

namespace {

constexpr double kNow = 1764475800;
const std::string kLabel = "mnt-\xff\xfe-\"quote";

class FuzzData final : public DataSource {
 public:
  FuzzData() {
    auto s = std::make_shared<Snapshot>();
    s->sequence = 7;
    s->timestamp = kNow;
    s->host = "fuzz-\xff";
    s->agent_version = KIWI_VERSION;
    s->started_at = kNow - 100;
    SensorReport r;
    r.name = "storage";
    r.plugin = "storage";
    r.timestamp = kNow;
    r.metrics = {{"storage_used_ratio", {{"mount", kLabel}}, 0.5, "ratio", MetricKind::gauge},
                 {"storage_size_bytes", {{"mount", kLabel}}, 1e308, "bytes", MetricKind::gauge},
                 {"cpu_usage_ratio", {}, 0.123456789, "ratio", MetricKind::gauge},
                 {"network_rx_bytes_total",
                  {{"interface", "eth0"}},
                  9e15 + 2,
                  "bytes",
                  MetricKind::counter}};
    s->sensors.push_back(r);
    r.name = "broken";
    r.state = SensorState::error;
    r.message = "bad \x01 \xc3\x28 file";
    r.metrics.clear();
    s->sensors.push_back(r);
    snapshot_ = s;
  }
  std::shared_ptr<const Snapshot> snapshot() const override { return snapshot_; }
  HistoryResult history(const HistoryQuery& q) const override {
    HistoryResult out;
    const double values[] = {1e308, std::numeric_limits<double>::quiet_NaN(), 0.5, -0.0};
    const std::size_t n = std::min<std::size_t>(q.limit, std::size(values));
    for (std::size_t i = 0; i < n; ++i) out.timestamps.push_back(kNow - 10 + i);
    HistorySeries s;
    s.key = "storage_used_ratio{mount=\"mnt-\xff\xfe-\\\"quote\"}";
    s.name = "storage_used_ratio";
    s.labels = {{"mount", kLabel}};
    s.unit = "ratio";
    s.values.assign(values, values + n);
    out.series.push_back(s);
    return out;
  }
  AgentStats stats() const override {
    AgentStats s;
    s.version = KIWI_VERSION;
    s.started_at = kNow - 100;
    s.store_last_error = "disk \xff full";
    return s;
  }
  std::vector<std::string> series_names() const override {
    return {"storage_used_ratio{mount=\"mnt-\xff\xfe-\\\"quote\"}", "storage_used_ratio",
            "cpu_usage_ratio"};
  }

 private:
  std::shared_ptr<const Snapshot> snapshot_;
};

struct World {
  StderrLogger log{LogLevel::error};
  FuzzData data;
  Config cfg = load_config_text(default_config_text(), "default", KIWI_FUZZ_BIN_DIR);
  PluginLoader loader{cfg, log};
  std::unique_ptr<Router> router;
  World() {
    std::vector<Route> routes;
    for (auto& e : cfg.routes)
      routes.push_back({e.path, std::make_shared<PluginInstance<Handler>>(
                                    loader.create_handler(e, data, KIWI_VERSION))});
    router = std::make_unique<Router>(std::move(routes));
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* input, std::size_t size) {
  static World* world = new World;  // lives for the whole run, as the agent's router does
  kiwi_fuzz::FakeRequest fake;
  fake.set_http(kiwi_fuzz::text(input, size));
  const Request req = fake.request();
  int route = -2;
  Response res = world->router->dispatch(req, &route);
  KIWI_FUZZ_CHECK(route >= -1 && route < static_cast<int>(world->router->routes().size()));
  KIWI_FUZZ_CHECK(res.status >= 100 && res.status <= 599);
  world->router->count(route, res.status);
  return 0;
}
