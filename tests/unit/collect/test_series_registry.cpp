// Series identity: a series (the family /metrics exposes, and its labels as a set) has one
// writer, the agent's own families are its alone, a family has one kind, and a sensor's static
// labels tell two instances apart.
#include <catch2/catch.hpp>

#include "collect/report.hpp"
#include "collect/series_registry.hpp"
#include "plugin/metric_check.hpp"
#include "test_support.hpp"

using namespace kiwi::agent;
using kiwi::MetricKind;

namespace {

using Lines = kiwi_test::LogLines;

kiwi::MetricValue metric(std::string name, std::vector<std::pair<std::string, std::string>> labels,
                         MetricKind kind = MetricKind::gauge) {
  kiwi::MetricValue m;
  m.name = std::move(name);
  m.labels = std::move(labels);
  m.kind = kind;
  return m;
}

// A reading of `metrics`, as a sensor's call returns it.
SampleCall reading(std::vector<kiwi::MetricValue> metrics) {
  SampleCall call;
  call.metrics = std::move(metrics);
  return call;
}

constexpr kiwi::MetricSpec kAgentRows[] = {
    {"sensor_success", kiwi::Unit::none, MetricKind::gauge, "sensor", "1 if ok"},
    {"http_requests_total", kiwi::Unit::count, MetricKind::counter, "route,status", "requests"},
};

}  // namespace

TEST_CASE(
    "series: the first sensor to store a series owns it, and another sensor's values are refused") {
  Lines log;
  SeriesRegistry series(100);
  ReportKeeper memory("memory", "memory"), script("script", "exec");
  memory.read(reading({metric("memory_used_bytes", {})}), 0, 1000, series, log);
  REQUIRE(memory.fresh().metrics.size() == 1);
  for (int i = 0; i < 3; ++i)
    script.read(reading({metric("memory_used_bytes", {}), metric("script_ok", {})}), 0,
                1000 * (i + 2), series, log);
  // Only its own series is kept: the history and /metrics see memory's value alone.
  REQUIRE(script.fresh().metrics.size() == 1);
  CHECK(script.fresh().metrics[0].name == "script_ok");
  CHECK(script.fresh().series_refused_total == 3);
  CHECK(script.fresh().state == kiwi::SensorState::ok);
  CHECK_THAT(script.fresh().message,
             Catch::Contains("memory_used_bytes is sensor memory's series"));
  CHECK(log.count("sensor script: memory_used_bytes is sensor memory's series") == 1);
  // The owner goes on as before.
  memory.read(reading({metric("memory_used_bytes", {})}), 0, 5000, series, log);
  CHECK(memory.fresh().metrics.size() == 1);
  CHECK(memory.fresh().series_refused_total == 0);
  CHECK(memory.fresh().message.empty());
}

TEST_CASE("series: the agent's own families are refused to every sensor, whatever the labels") {
  Lines log;
  SeriesRegistry series(100);
  series.reserve(series.owner(kiwi::kAgentReport), kAgentRows);
  ReportKeeper script("evil", "exec"), agent(std::string(kiwi::kAgentReport), "agent");
  // Before the agent has stored any value of them.
  script.read(
      reading({metric("sensor_success", {{"sensor", "cpu"}}),
               metric("http_requests", {{"route", "/fake"}}, MetricKind::counter),
               metric("http_requests_total", {}, MetricKind::gauge), metric("evil_ok", {})}),
      0, 1000, series, log);
  REQUIRE(script.fresh().metrics.size() == 1);
  CHECK(script.fresh().metrics[0].name == "evil_ok");
  CHECK(script.fresh().series_refused_total == 3);
  CHECK_THAT(script.fresh().message,
             Catch::Contains("sensor_success is one of the agent's own metrics"));
  agent.read(reading({metric("sensor_success", {{"sensor", "cpu"}})}), 0, 1000, series, log);
  CHECK(agent.fresh().metrics.size() == 1);
}

TEST_CASE("series: labels are a set, and a family keeps the kind it was stored with") {
  SeriesRegistry series(100);
  const auto a = series.owner("a"), b = series.owner("b");
  CHECK(series.claim(a, metric("x", {{"k", "1"}, {"l", "2"}})).stored());
  // The same series written in another order: a's.
  const auto swapped = series.claim(b, metric("x", {{"l", "2"}, {"k", "1"}}));
  CHECK(swapped.refusal == SeriesRegistry::Refusal::owned);
  CHECK(series.name_of(swapped.other) == "a");
  // Another series of the family: anyone's, of the same kind.
  CHECK(series.claim(b, metric("x", {{"k", "2"}})).stored());
  // A counter "c" is exposed as c_total: a gauge c_total is that family.
  CHECK(series.claim(a, metric("c", {}, MetricKind::counter)).stored());
  const auto clash = series.claim(b, metric("c_total", {{"z", "1"}}, MetricKind::gauge));
  CHECK(clash.refusal == SeriesRegistry::Refusal::kind);
  CHECK(clash.kind == MetricKind::counter);
  // Labels with the same text split differently are other series.
  CHECK(series.claim(b, metric("y", {{"a", "bc"}})).stored());
  CHECK(series.claim(a, metric("y", {{"ab", "c"}})).stored());
  CHECK(series.claim(a, metric("y", {})).stored());
}

TEST_CASE("series: a released sensor's series are free, and the limit counts what a sensor owns") {
  SeriesRegistry series(2);
  const auto a = series.owner("a"), b = series.owner("b");
  CHECK(series.claim(a, metric("x", {})).stored());
  CHECK(series.claim(a, metric("y", {})).stored());
  CHECK(series.claim(a, metric("z", {})).refusal == SeriesRegistry::Refusal::limit);
  CHECK(series.claim(b, metric("x", {})).refusal == SeriesRegistry::Refusal::owned);
  CHECK(series.owned_by(a) == 2);
  series.release(a);
  CHECK(series.owned_by(a) == 0);
  CHECK(series.claim(b, metric("x", {})).stored());
  // A family forgotten with its last series takes another kind.
  CHECK(series.claim(b, metric("y", {}, MetricKind::counter)).stored());
  CHECK(series.owner("a") == a);  // the name keeps its Owner
  CHECK(series.claim(a, metric("x", {})).refusal == SeriesRegistry::Refusal::owned);
  series.set_limit(1);  // lowered: what it owns stays its own, nothing new
  CHECK(series.claim(b, metric("w", {})).refusal == SeriesRegistry::Refusal::limit);
  CHECK(series.claim(b, metric("x", {})).stored());
}

TEST_CASE("series: a sensor's labels tell two instances apart and keep its own as exported_") {
  Lines log;
  SeriesRegistry series(100);
  ReportKeeper node("node", "exec"), prom("prom", "exec");
  node.set_labels({{"source", "node_exporter"}});
  prom.set_labels({{"source", "prometheus"}, {"room", "lab"}});
  node.read(reading({metric("go_goroutines", {})}), 0, 1000, series, log);
  prom.read(reading({metric("go_goroutines", {{"room", "attic"}})}), 0, 1000, series, log);
  REQUIRE(node.fresh().metrics.size() == 1);
  REQUIRE(prom.fresh().metrics.size() == 1);
  using L = std::vector<std::pair<std::string, std::string>>;
  CHECK(node.fresh().metrics[0].labels == L{{"source", "node_exporter"}});
  CHECK(prom.fresh().metrics[0].labels ==
        L{{"exported_room", "attic"}, {"source", "prometheus"}, {"room", "lab"}});
  CHECK(log.lines.empty());
}

TEST_CASE(
    "series: a histogram's series are one family, each series its own, the kind the family's") {
  SeriesRegistry series(100);
  const auto a = series.owner("a"), b = series.owner("b");
  const auto H = MetricKind::histogram;
  CHECK(series.claim(a, metric("rpc_seconds_bucket", {{"le", "0.1"}}, H)).stored());
  CHECK(series.claim(a, metric("rpc_seconds_bucket", {{"le", "+Inf"}}, H)).stored());
  CHECK(series.claim(a, metric("rpc_seconds_sum", {}, H)).stored());
  CHECK(series.claim(a, metric("rpc_seconds_count", {}, H)).stored());  // not the _sum's series
  CHECK(series.owned_by(a) == 4);
  // Another sensor's bucket of the same labels is a's; one of its own labels is its own.
  CHECK(series.claim(b, metric("rpc_seconds_count", {}, H)).refusal ==
        SeriesRegistry::Refusal::owned);
  CHECK(series.claim(b, metric("rpc_seconds_count", {{"job", "b"}}, H)).stored());
  // A gauge named as the family, or as one of its series, would show in /metrics under a name
  // of the histogram's: refused as another kind.
  const auto clash = series.claim(b, metric("rpc_seconds", {}, MetricKind::gauge));
  CHECK(clash.refusal == SeriesRegistry::Refusal::kind);
  CHECK(clash.kind == H);
  const auto sum = series.claim(b, metric("rpc_seconds_sum", {}, MetricKind::gauge));
  CHECK(sum.refusal == SeriesRegistry::Refusal::kind);
  CHECK(sum.kind == H);
  // A counter rpc_seconds_count is exposed as rpc_seconds_count_total: no clash.
  CHECK(series.claim(b, metric("rpc_seconds_count", {}, MetricKind::counter)).stored());
  // And the other way round: a gauge first, then a histogram whose series would share its name.
  CHECK(series.claim(b, metric("queue_seconds_count", {}, MetricKind::gauge)).stored());
  const auto late = series.claim(a, metric("queue_seconds_sum", {}, H));
  CHECK(late.refusal == SeriesRegistry::Refusal::kind);
  CHECK(late.kind == MetricKind::gauge);
  // A summary's quantiles are its family's name.
  const auto S = MetricKind::summary;
  CHECK(series.claim(a, metric("gc_seconds", {{"quantile", "0.5"}}, S)).stored());
  CHECK(series.claim(a, metric("gc_seconds_sum", {}, S)).stored());
  CHECK(series.claim(b, metric("gc_seconds", {}, MetricKind::gauge)).refusal ==
        SeriesRegistry::Refusal::kind);
}
