// A sensor that emits every kind of metric a careless or hostile plugin might: names Prometheus
// rejects, reserved and repeated label names, unknown units, non-finite values, a series twice in
// one sample, and label values that need escaping. The host must drop the invalid ones, count and
// name them, and escape the rest everywhere (issue 11, item 6).
#include <cmath>
#include <kiwi/sensor.hpp>
#include <limits>

namespace {
using kiwi::Label;
using kiwi::MetricKind;
using kiwi::Unit;

// A row made at run time, as the exec sensor makes one per parsed line.
constexpr kiwi::MetricSpec row(std::string_view name, Unit unit = Unit::none,
                               MetricKind kind = MetricKind::gauge) {
  return {name, unit, kind, "", ""};
}

struct Chaos : kiwi::Sensor {
  explicit Chaos(const kiwi::SensorContext&) {}
  kiwi::SampleResult sample(kiwi::MetricSink& sink) override {
    sink.emit(row("chaos_ok"), 1);
    const Label escaped[] = {{"path", "a \"quoted\" \\ back\nslash"}};
    sink.emit(row("chaos_escaped", Unit::bytes), escaped, 2);
    sink.emit(row("chaos bad name"), 3);
    sink.emit(row("9starts_with_digit"), 4);
    sink.emit(row("chaos_furlongs", static_cast<Unit>(99)), 5);
    const Label bad[] = {{"bad-label", "x"}}, reserved[] = {{"__name__", "x"}},
                twice[] = {{"a", "1"}, {"a", "2"}};
    sink.emit(row("chaos_bad_label"), bad, 6);
    sink.emit(row("chaos_reserved_label"), reserved, 7);
    sink.emit(row("chaos_label_twice"), twice, 8);
    sink.emit(row("chaos_nan"), std::nan(""));
    sink.emit(row("chaos_inf"), std::numeric_limits<double>::infinity());
    const Label ab[] = {{"a", "1"}, {"b", "2"}}, ba[] = {{"b", "2"}, {"a", "1"}};
    sink.emit(row("chaos_twice"), ab, 5);
    sink.emit(row("chaos_twice"), ba, 6);  // the same series, labels reordered
    sink.emit(row("chaos_kind", Unit::none, static_cast<MetricKind>(7)), 9);
    return {};
  }
};
}  // namespace

KIWI_SENSOR_PLUGIN(Chaos, "chaos", "emits invalid metrics (test plugin)", kiwi::no_options,
                   kiwi::no_metrics)
