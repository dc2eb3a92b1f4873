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

using kiwi::Unit;
constexpr kiwi::MetricSpec kTemperature = kiwi::gauge("labelled_temperature_celsius", Unit::celsius,
                                                      "zone", "the celsius option, +1 per zone");
constexpr kiwi::MetricSpec kEvents =
    kiwi::counter("labelled_events_total", Unit::count, "zone", "10 per sample");
constexpr kiwi::MetricSpec kEventRate =
    kiwi::gauge("labelled_events_per_second", Unit::per_second, "zone", "always 10");
constexpr kiwi::MetricSpec kRestarts =
    kiwi::counter("labelled_restarts_total", Unit::count, "instance", "always 3, without a rate");
constexpr kiwi::MetricSpec kBuffer =
    kiwi::gauge("labelled_buffer_bytes", Unit::bytes, "instance", "always 3 MiB");
constexpr kiwi::MetricSpec kMetrics[] = {kTemperature, kEvents, kEventRate, kRestarts, kBuffer};

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
      sink.emit(kTemperature, {zones[i]}, celsius + static_cast<double>(i));
      sink.emit(kEvents, {zones[i]}, static_cast<double>(samples * 10));
      sink.emit(kEventRate, {zones[i]}, 10);
    }
    sink.emit(kRestarts, {instance}, 3);
    sink.emit(kBuffer, {instance}, 3 * 1024 * 1024);
    return {};
  }
  std::string instance;
  double celsius;
  std::vector<std::string> zones;
  std::int64_t samples = 0;
};
}  // namespace

KIWI_SENSOR_PLUGIN(Labelled, "labelled", "labels from its options (test plugin)", kOptions,
                   kMetrics)
