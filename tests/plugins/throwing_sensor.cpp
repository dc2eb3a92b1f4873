// A sensor that fails on every sample: the collector must report it and keep the others going.
#include <kiwi/sensor.hpp>
#include <stdexcept>

namespace {
constexpr kiwi::MetricSpec kHalf[] = {{"half_written", kiwi::Unit::none, kiwi::MetricKind::gauge,
                                       "", "emitted before the throw, so never kept"}};
struct Throws : kiwi::Sensor {
  explicit Throws(const kiwi::SensorContext&) {}
  kiwi::SampleResult sample(kiwi::MetricSink& sink) override {
    sink.emit(kHalf[0], 1);
    throw std::runtime_error("read /sys/bus/i2c/devices/1-0048/temp: Input/output error");
  }
};
}  // namespace

KIWI_SENSOR_PLUGIN(Throws, "throws", "fails on every sample (test plugin)", kiwi::no_options, kHalf)
