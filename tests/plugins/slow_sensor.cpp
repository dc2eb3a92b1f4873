// A sensor whose sample() takes `sleep_ms` (-1: never returns), for the collector's deadlines: a
// slow or hung plugin must not stall the other sensors, start-up, reload or shutdown. With
// `first_only`, only its first sample is slow (a slow start); `fail_after` > 0 makes every sample
// after that many throw (a sensor that breaks while running).
#include <chrono>
#include <kiwi/sensor.hpp>
#include <stdexcept>
#include <thread>

namespace {
constexpr kiwi::MetricSpec kSamples[] = {
    {"slow_samples", kiwi::Unit::none, kiwi::MetricKind::gauge, "", "samples taken so far"}};
constexpr kiwi::OptionSpec kOptions[] = {
    {"sleep_ms", kiwi::OptionType::integer, "0",
     "time one sample takes, in milliseconds; -1: it never returns"},
    {"first_only", kiwi::OptionType::boolean, "false", "slow in the first sample only"},
    {"fail_after", kiwi::OptionType::integer, "0", "samples after this many throw (0: never)"}};

struct Slow : kiwi::Sensor {
  explicit Slow(const kiwi::SensorContext& ctx)
      : sleep_ms(ctx.options.get_int("sleep_ms")),
        first_only(ctx.options.get_bool("first_only")),
        fail_after(ctx.options.get_int("fail_after")) {}
  kiwi::SampleResult sample(kiwi::MetricSink& sink) override {
    ++samples;
    if (fail_after > 0 && samples > fail_after) throw std::runtime_error("broke on purpose");
    if (!first_only || samples == 1) {
      if (sleep_ms < 0)
        for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    }
    sink.emit(kSamples[0], static_cast<double>(samples));
    return {};
  }
  std::int64_t sleep_ms;
  bool first_only;
  std::int64_t fail_after;
  std::int64_t samples = 0;
};
}  // namespace

KIWI_SENSOR_PLUGIN(Slow, "slow", "sleeps in every sample (test plugin)", kOptions, kSamples)
