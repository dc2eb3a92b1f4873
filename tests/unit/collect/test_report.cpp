// Report assembly: what a reading becomes in the snapshot (the series limit, the invalid-metric
// note, counters, a time-out), and a tick's snapshot built from the keepers, a report the agent
// makes itself included.
#include <catch2/catch.hpp>

#include "collect/report.hpp"
#include "plugin/metric_check.hpp"
#include "test_support.hpp"

using namespace kiwi::agent;
using namespace std::chrono_literals;

namespace {

using Lines = kiwi_test::LogLines;

// A reading of the gauges `names`, each with value `value`, checked as a sensor's is.
SampleCall reading(const std::vector<std::string>& names, double value) {
  SampleCall call;
  CheckedSink sink(call.metrics);
  for (auto& n : names) sink.emit({n, kiwi::Unit::none, kiwi::MetricKind::gauge, "", ""}, value);
  call.dropped_note = sink.finish();
  call.dropped = sink.dropped();
  return call;
}

// The snapshot of one tick from `keepers`, after `last`; the metrics of the reports new in it
// (what goes to the store) in `fresh`, when given.
std::shared_ptr<kiwi::Snapshot> assemble(std::uint64_t seq, std::int64_t ts_ms,
                                         std::vector<ReportKeeper*> keepers,
                                         const kiwi::Snapshot* last = nullptr,
                                         std::vector<const kiwi::MetricValue*>* fresh = nullptr) {
  CollectorSettings settings;
  settings.host = "board";
  SnapshotAssembly assembly(seq, ts_ms, settings, last, keepers.size());
  std::vector<const kiwi::MetricValue*> ignored;
  for (auto* k : keepers) assembly.add(*k, fresh ? *fresh : ignored);
  return assembly.finish();
}

}  // namespace

TEST_CASE("report: values of series beyond the limit are refused, counted, and logged once") {
  Lines log;
  SeriesRegistry series(3);
  ReportKeeper k("s", "test");
  k.read(reading({"a", "b"}, 1), 0.001, 1000, series, log);
  REQUIRE(k.has_fresh());
  CHECK(k.fresh().metrics.size() == 2);
  CHECK(k.fresh().series_refused_total == 0);
  // c is the third series, d and e are over the limit of 3; a and b are known.
  k.read(reading({"a", "b", "c", "d", "e"}, 2), 0.001, 2000, series, log);
  CHECK(k.fresh().metrics.size() == 3);
  CHECK(k.fresh().series_refused_total == 2);
  k.read(reading({"a", "d"}, 3), 0.001, 3000, series, log);
  CHECK(k.fresh().metrics.size() == 1);
  CHECK(k.fresh().series_refused_total == 3);
  CHECK(log.count("sensor s: reached its limit of 3 series") == 1);
  CHECK_THAT(k.fresh().message, Catch::Contains("reached its limit of 3 series"));
}

TEST_CASE(
    "report: an invalid metric is noted in the message and logged when what is dropped "
    "changes") {
  Lines log;
  SeriesRegistry series(100);
  ReportKeeper k("s", "test");
  for (int i = 0; i < 3; ++i)
    k.read(reading({"ok", "Bad-Name"}, 1), 0, 1000 * (i + 1), series, log);
  CHECK(k.fresh().state == kiwi::SensorState::ok);
  CHECK_THAT(k.fresh().message, Catch::Contains("Bad-Name"));
  CHECK(k.fresh().invalid_metrics_total == 3);
  CHECK(log.count("sensor s: ") == 1);
  k.read(reading({"ok"}, 1), 0, 4000, series, log);
  CHECK(k.fresh().message.empty());
  k.read(reading({"ok", "Bad-Name"}, 1), 0, 5000, series, log);
  CHECK(log.count("sensor s: ") == 2);  // dropped again after a clean reading: logged again
}

TEST_CASE(
    "report: a sample's duration is kept in whole microseconds, which the history stores "
    "small") {
  Lines log;
  SeriesRegistry series(10);
  ReportKeeper k("s", "test");
  k.read(reading({"a"}, 1), 0.0012345678, 1000, series, log);
  CHECK(k.fresh().duration_seconds == 0.001235);
  k.read(reading({"a"}, 1), 2.0000004, 2000, series, log);
  CHECK(k.fresh().duration_seconds == 2.0);
}

TEST_CASE("report: a time-out is an error report once, and the late reading is dropped, logged") {
  Lines log;
  ReportKeeper k("s", "test");
  k.time_out(250ms, 5000, log);
  REQUIRE(k.has_fresh());
  CHECK(k.fresh().state == kiwi::SensorState::error);
  CHECK(k.fresh().message == "timed out after 250ms; not called again until its call returns");
  CHECK(k.fresh().duration_seconds == 0.25);
  CHECK(k.fresh().timestamp == 5.0);
  CHECK(k.fresh().errors_total == 1);
  k.came_back(3200ms, log);
  CHECK(log.count("sensor s: returned after 3.2s; sampling again") == 1);
}

TEST_CASE(
    "report: a snapshot moves new reports in, carries the others from the last one, and "
    "says which were never read") {
  Lines log;
  SeriesRegistry series(100);
  ReportKeeper a("a", "test"), b("b", "test"), never("never", "test");
  a.read(reading({"x"}, 1), 0.5, 1000, series, log);
  b.read(reading({"y"}, 2), 0.5, 1000, series, log);
  auto first = assemble(1, 1000, {&a, &b, &never});
  CHECK(first->sequence == 1);
  CHECK(first->timestamp == 1.0);
  CHECK(first->host == "board");
  REQUIRE(first->sensors.size() == 3);
  CHECK(first->sensors[2].state == kiwi::SensorState::no_data);
  CHECK(first->sensors[2].message == "first sample in progress");
  CHECK(first->sensors[2].timestamp == 1.0);
  CHECK_FALSE(a.has_fresh());  // moved into the snapshot
  // Tick 2: only b has a new reading; the order changed (a reconfiguration).
  b.read(reading({"y"}, 3), 0.5, 2000, series, log);
  auto second = assemble(2, 2000, {&b, &a, &never}, first.get());
  REQUIRE(second->sensors.size() == 3);
  CHECK(second->sensors[0].name == "b");
  CHECK(second->sensors[0].metrics[0].value == 3);
  CHECK(second->sensors[1].name == "a");
  CHECK(second->sensors[1].timestamp == 1.0);  // its reading of tick 1, carried
  CHECK(second->sensors[1].metrics[0].value == 1);
  CHECK(second->sensors[2].message == "first sample in progress");
  // The snapshot before keeps what it showed (a reader may still hold it).
  CHECK(first->sensors[1].metrics[0].value == 2);
}

TEST_CASE("report: a report the agent makes itself from MetricSpec rows takes the same path") {
  // Not a plugin: its rows and values go through the metric check into a keeper, and from there
  // into the snapshot beside the sensors' reports.
  static constexpr kiwi::MetricSpec kRows[] = {
      {"agent_ticks_total", kiwi::Unit::count, kiwi::MetricKind::counter, "", "Ticks taken."},
      {"agent_up", kiwi::Unit::none, kiwi::MetricKind::gauge, "", "1 while running."},
  };
  Lines log;
  SeriesRegistry series(100);
  SampleCall own;
  CheckedSink sink(own.metrics);
  sink.emit(kRows[0], 42);
  sink.emit(kRows[1], 1);
  own.dropped_note = sink.finish();
  ReportKeeper agent("agent", "kiwi-agent"), sensor("cpu", "cpu");
  sensor.read(reading({"cpu_x"}, 1), 0.1, 7000, series, log);
  agent.read(std::move(own), 0, 7000, series, log);
  std::vector<const kiwi::MetricValue*> fresh;
  auto snap = assemble(1, 7000, {&sensor, &agent}, nullptr, &fresh);
  // Both reports are new: all three metrics go to the store, read where they are in the snapshot.
  REQUIRE(fresh.size() == 3);
  CHECK(fresh[0] == &snap->sensors[0].metrics[0]);
  CHECK(fresh[2] == &snap->sensors[1].metrics[1]);
  // A tick after, with only the sensor read again: the agent's report is carried, not stored.
  sensor.read(reading({"cpu_x"}, 2), 0.1, 8000, series, log);
  fresh.clear();
  auto next = assemble(2, 8000, {&sensor, &agent}, snap.get(), &fresh);
  REQUIRE(fresh.size() == 1);
  CHECK(fresh[0]->value == 2);
  CHECK(next->sensors[1].metrics.size() == 2);
  REQUIRE(snap->sensors.size() == 2);
  const auto& r = snap->sensors[1];
  CHECK(r.name == "agent");
  CHECK(r.plugin == "kiwi-agent");
  CHECK(r.state == kiwi::SensorState::ok);
  CHECK(r.timestamp == 7.0);
  REQUIRE(r.metrics.size() == 2);
  CHECK(r.metrics[0].name == "agent_ticks_total");
  CHECK(r.metrics[0].kind == kiwi::MetricKind::counter);
  CHECK(r.metrics[0].value == 42);
  CHECK(r.metrics[1].name == "agent_up");
  CHECK(log.lines.empty());
}
