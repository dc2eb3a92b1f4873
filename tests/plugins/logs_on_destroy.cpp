// A sensor whose destructor logs through the logger its context handed it, which the SDK promises
// outlives the object: the host must keep it alive until the object is gone (a heap-use-after-free
// under ASan otherwise; issue 11, item 3). `--check-config` and every shutdown destroy it.
#include <kiwi/sensor.hpp>
#include <string>

namespace {
constexpr kiwi::MetricSpec kAlive[] = {
    {"alive", kiwi::Unit::none, kiwi::MetricKind::gauge, "", "1 while the object lives"}};
constexpr kiwi::OptionSpec kOptions[] = {
    {"farewell", kiwi::OptionType::string, "\"goodbye\"", "what the destructor logs"}};

struct LogsOnDestroy : kiwi::Sensor {
  explicit LogsOnDestroy(const kiwi::SensorContext& ctx)
      : log(ctx.log), farewell(ctx.options.get_string("farewell")) {}
  ~LogsOnDestroy() override { log.info("destroyed: " + farewell); }
  kiwi::SampleResult sample(kiwi::MetricSink& sink) override {
    sink.emit(kAlive[0], 1);
    return {};
  }
  kiwi::Logger& log;
  std::string farewell;
};
}  // namespace

KIWI_SENSOR_PLUGIN(LogsOnDestroy, "logs_on_destroy", "logs from its destructor (test plugin)",
                   kOptions, kAlive)
