// A sensor that fails on every sample: the collector must report it and keep the others going.
#include <kiwi/sensor.hpp>
#include <stdexcept>

namespace {
struct Throws : kiwi::Sensor {
  explicit Throws(const kiwi::SensorContext&) {}
  kiwi::SampleResult sample(kiwi::MetricSink& sink) override {
    sink.gauge("half_written", 1, "");
    throw std::runtime_error("read /sys/bus/i2c/devices/1-0048/temp: Input/output error");
  }
};
}  // namespace

KIWI_SENSOR_PLUGIN(Throws, "throws", "fails on every sample (test plugin)", kiwi::no_options,
                   kiwi::no_metrics)
