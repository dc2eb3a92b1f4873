// A sensor of a plugin the dashboard has no card for, whose label values come from its options:
// untrusted text, as an exec script would print it. It emits `series` gauges and counters, each
// counter with the per-second rate beside it, plus one counter without a rate and one gauge of
// another unit, so the dashboard's generic card and its charts are tested on known values. Those
// two carry the instance name as a label: two instances emit no series twice.
#include <kiwi/sensor.hpp>
#include <string>
#include <vector>

namespace {
constexpr kiwi::OptionSpec kOptions[] = {
    {"label", kiwi::OptionType::string, "\"zone\"",
     "text the zone label values start with (any text)"},
    {"series", kiwi::OptionType::integer, "1", "zones, each a series of every labelled metric"},
    {"celsius", kiwi::OptionType::number, "40", "temperature of the first zone; +1 per zone"}};

struct Labelled : kiwi::Sensor {
  explicit Labelled(const kiwi::SensorContext& ctx)
      : instance(ctx.instance_name), celsius(ctx.options.get_number("celsius")) {
    const auto n = ctx.options.get_int("series");
    for (std::int64_t i = 0; i < n; ++i)
      zones.push_back(ctx.options.get_string("label") + (n > 1 ? "-" + std::to_string(i) : ""));
  }
  kiwi::SampleResult sample(kiwi::MetricSink& sink) override {
    ++samples;
    for (std::size_t i = 0; i < zones.size(); ++i) {
      const kiwi::Label zone[] = {{"zone", zones[i]}};
      sink.emit("labelled_temperature_celsius", zone, celsius + static_cast<double>(i), "celsius",
                kiwi::MetricKind::gauge);
      sink.emit("labelled_events_total", zone, static_cast<double>(samples * 10), "count",
                kiwi::MetricKind::counter);
      sink.emit("labelled_events_per_second", zone, 10, "per_second", kiwi::MetricKind::gauge);
    }
    const kiwi::Label self[] = {{"instance", instance}};
    sink.emit("labelled_restarts_total", self, 3, "count", kiwi::MetricKind::counter);
    sink.emit("labelled_buffer_bytes", self, 3 * 1024 * 1024, "bytes", kiwi::MetricKind::gauge);
    return {};
  }
  std::string instance;
  double celsius;
  std::vector<std::string> zones;
  std::int64_t samples = 0;
};
}  // namespace

KIWI_SENSOR_PLUGIN(Labelled, "labelled", "labels from its options (test plugin)", kOptions,
                   kiwi::no_metrics)
