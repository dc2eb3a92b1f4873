// A complete sensor plugin: the seconds since boot, from <procfs>/uptime.
#include <kiwi/io.hpp>
#include <kiwi/sensor.hpp>

namespace {

constexpr kiwi::OptionSpec kOptions[] = {
    {"scale", kiwi::OptionType::number, "1.0", "factor applied to the uptime (1.0: seconds)"}};

// Each metric is declared once, and emitted through its row.
constexpr kiwi::MetricSpec kUptime{"uptime_seconds", kiwi::Unit::seconds, kiwi::MetricKind::gauge,
                                   "", "time since boot (first field of /proc/uptime)"};
constexpr kiwi::MetricSpec kMetrics[] = {kUptime};

class UptimeSensor final : public kiwi::Sensor {
 public:
  explicit UptimeSensor(const kiwi::SensorContext& ctx)
      : path_(kiwi::join_path(ctx.procfs, "uptime")), scale_(ctx.options.get_number("scale")) {}

  kiwi::SampleResult sample(kiwi::MetricSink& sink) override {
    std::string text = kiwi::read_required_file(path_);  // throws naming the file: status error
    std::string_view rest = text;
    auto seconds = kiwi::to_number<double>(kiwi::next_field(rest));
    if (!seconds) throw std::runtime_error(path_ + ": no uptime in '" + text.substr(0, 40) + "'");
    sink.emit(kUptime, *seconds * scale_);
    return kiwi::SampleResult::ok();
  }

 private:
  std::string path_;
  double scale_;
};

}  // namespace

KIWI_SENSOR_PLUGIN(UptimeSensor, "uptime", "seconds since boot", kOptions, kMetrics)
