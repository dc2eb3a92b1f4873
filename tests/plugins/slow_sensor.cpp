// A sensor that takes `sleep_ms` per sample: a stuck collector, so the snapshot goes stale while
// the HTTP workers keep answering.
#include <chrono>
#include <kiwi/sensor.hpp>
#include <thread>

namespace {
constexpr kiwi::OptionSpec kOptions[] = {
    {"sleep_ms", kiwi::OptionType::integer, "0", "time one sample takes, in milliseconds"}};

struct Slow : kiwi::Sensor {
  explicit Slow(const kiwi::SensorContext& ctx) : sleep_ms(ctx.options.get_int("sleep_ms")) {}
  kiwi::SampleResult sample(kiwi::MetricSink& sink) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    sink.gauge("slow_samples", 1, "");
    return {};
  }
  std::int64_t sleep_ms;
};
}  // namespace

KIWI_SENSOR_PLUGIN(Slow, "slow", "sleeps in every sample (test plugin)", kOptions, kiwi::no_metrics)
