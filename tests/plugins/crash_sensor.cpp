// A sensor whose sample() dereferences a null pointer: the agent dies of SIGSEGV, and its last log
// line names this sensor (fatal_signal.hpp).
#include <kiwi/sensor.hpp>

namespace {
constexpr kiwi::MetricSpec kNone[] = {
    {"never", kiwi::Unit::none, kiwi::MetricKind::gauge, "", "the sample crashes first"}};
struct Crashes : kiwi::Sensor {
  explicit Crashes(const kiwi::SensorContext&) {}
  kiwi::SampleResult sample(kiwi::MetricSink& sink) override {
    volatile int* nowhere = nullptr;
    sink.emit(kNone[0], *nowhere);
    return {};
  }
};
}  // namespace

KIWI_SENSOR_PLUGIN(Crashes, "crashes", "dereferences null in sample() (test plugin)",
                   kiwi::no_options, kNone)
