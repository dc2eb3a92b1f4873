// A sensor that emits every kind of metric a careless or hostile plugin might: names Prometheus
// rejects, reserved and repeated label names, unknown units, non-finite values, a series twice in
// one sample, and label values that need escaping. The host must drop the invalid ones, count and
// name them, and escape the rest everywhere (issue 11, item 6).
#include <cmath>
#include <kiwi/sensor.hpp>
#include <limits>

namespace {
struct Chaos : kiwi::Sensor {
  explicit Chaos(const kiwi::SensorContext&) {}
  kiwi::SampleResult sample(kiwi::MetricSink& sink) override {
    sink.gauge("chaos_ok", 1, "");
    sink.gauge("chaos_escaped", {{"path", "a \"quoted\" \\ back\nslash"}}, 2, "bytes");
    sink.gauge("chaos bad name", 3, "");
    sink.gauge("9starts_with_digit", 4, "");
    sink.gauge("chaos_furlongs", 5, "furlongs");
    sink.gauge("chaos_bad_label", {{"bad-label", "x"}}, 6, "");
    sink.gauge("chaos_reserved_label", {{"__name__", "x"}}, 7, "");
    sink.gauge("chaos_label_twice", {{"a", "1"}, {"a", "2"}}, 8, "");
    sink.gauge("chaos_nan", std::nan(""), "");
    sink.gauge("chaos_inf", std::numeric_limits<double>::infinity(), "");
    sink.gauge("chaos_twice", {{"a", "1"}, {"b", "2"}}, 5, "");
    sink.gauge("chaos_twice", {{"b", "2"}, {"a", "1"}}, 6,
               "");  // the same series, labels reordered
    sink.emit("chaos_kind", {}, 9, "", static_cast<kiwi::MetricKind>(7));
    return {};
  }
};
}  // namespace

KIWI_SENSOR_PLUGIN(Chaos, "chaos", "emits invalid metrics (test plugin)", kiwi::no_options,
                   kiwi::no_metrics)
