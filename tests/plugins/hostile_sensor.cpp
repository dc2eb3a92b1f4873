// A sensor whose data is valid but hostile to every output (issue 16, item 2): a label value that
// is not UTF-8 and needs escaping (`mnt-\xff\xfe-"quote`, as a mount path can be), values whose
// rounding overflows (1e308), and a message with invalid UTF-8 and terminal control bytes. Every
// output must stay valid: /metrics for promtool, /api/current and /api/history as UTF-8 JSON with
// the values present, the log one line of text per message.
#include <kiwi/sensor.hpp>

namespace {
using kiwi::Unit;

constexpr kiwi::MetricSpec kValue =
    kiwi::gauge("hostile_value", Unit::none, "path", "1e308, under a label that is not UTF-8");
constexpr kiwi::MetricSpec kNegative =
    kiwi::gauge("hostile_negative_ratio", Unit::ratio, "", "always -1e308");
constexpr kiwi::MetricSpec kMetrics[] = {kValue, kNegative};

struct Hostile : kiwi::Sensor {
  explicit Hostile(const kiwi::SensorContext&) {}
  kiwi::SampleResult sample(kiwi::MetricSink& sink) override {
    sink.emit(kValue, {"mnt-\xff\xfe-\"quote"}, 1e308);
    sink.emit(kNegative, -1e308);
    return kiwi::SampleResult::ok("read \xff\xfe from mnt-\xff\xfe-\"quote\n\x1b[31mred\x1b[0m");
  }
};
}  // namespace

KIWI_SENSOR_PLUGIN(Hostile, "hostile", "valid data hostile to every output (test plugin)",
                   kiwi::no_options, kMetrics)
