// A sensor whose factory refuses to start, as a plugin with a bad option value would.
#include <kiwi/sensor.hpp>
#include <stdexcept>

namespace {
struct Refuses : kiwi::Sensor {
  explicit Refuses(const kiwi::SensorContext&) {
    throw std::runtime_error("device /dev/i2c-1 not found");
  }
  kiwi::SampleResult sample(kiwi::MetricSink&) override { return {}; }
};
}  // namespace

KIWI_SENSOR_PLUGIN(Refuses, "refuses", "always refuses to start", kiwi::no_options,
                   kiwi::no_metrics)
