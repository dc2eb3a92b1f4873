// kiwi-agent plugin SDK: sensor plugins.
//
// A sensor reads the machine (under the configured procfs/sysfs roots, never "/proc" directly) and
// emits flat metrics in base units through a MetricSink.
//
// Life cycle and threading:
//   - The factory runs once per [[sensor]] entry, on the main thread, before any sampling. It may
//     throw std::exception to refuse the configuration; start-up then stops with exit code 2.
//   - sample() is called by the collector, at most once at a time per instance (never concurrently
//     for one object), but possibly from different threads over the object's life. Keep state that
//     spans samples (previous counters) in members, never in file-level statics: two [[sensor]]
//     entries of one plugin are two independent objects.
//   - The object is destroyed before its shared object is unloaded.
//
// Errors: "no data" (a VM without thermal zones) is a normal result: return
// SampleResult::no_data("why"). A real failure throws std::exception: the collector catches it,
// marks this sensor `error` with e.what() in the snapshot, and the other sensors go on.
#pragma once

#include <boost/dll/alias.hpp>
#include <chrono>
#include <initializer_list>
#include <memory>

#include "kiwi/plugin.hpp"

namespace kiwi {

enum class MetricKind : std::uint32_t { gauge, counter };

struct Label {
  std::string_view name;
  std::string_view value;
};

// The units a metric may have: base units only (README "Plugins"). "" is a unitless value. The
// host drops a metric whose unit is not one of these (MetricSink).
inline constexpr std::string_view kUnits[] = {
    "bytes", "seconds", "celsius", "hertz", "ratio", "count", "bytes_per_second", "per_second", ""};

inline constexpr bool is_known_unit(std::string_view unit) {
  for (auto u : kUnits)
    if (u == unit) return true;
  return false;
}

// Receives the metrics of one sample. Strings are copied before emit() returns, so temporaries are
// fine. Names are stable API (snake_case, unit suffix: `_bytes`, `_ratio`, `_celsius`, `_hertz`);
// `unit` is one of kUnits.
//
// The host checks every metric before it goes anywhere (snapshot, history, /metrics): the name
// must match [a-zA-Z_][a-zA-Z0-9_]*, each label name too (not starting with "__", no name twice),
// label values are any text (escaped wherever they are written), the unit one of kUnits, the
// value finite, and a series (name and labels) may appear once per sample. A metric that fails is
// dropped, counted in the sensor's `invalid_metrics_total`, and named in its status message; the
// rest of the sample is kept.
class MetricSink {
 public:
  virtual void emit(std::string_view name, std::span<const Label> labels, double value,
                    std::string_view unit, MetricKind kind) = 0;

  // The end of the time this sample() call has: its start plus the sensor's `timeout`. A sensor
  // that waits on something (a child process) gives up by then. time_point::max() when there is
  // none.
  virtual std::chrono::steady_clock::time_point deadline() const {
    return std::chrono::steady_clock::time_point::max();
  }

  void gauge(std::string_view name, double value, std::string_view unit) {
    emit(name, {}, value, unit, MetricKind::gauge);
  }
  void gauge(std::string_view name, std::initializer_list<Label> labels, double value,
             std::string_view unit) {
    emit(name, std::span<const Label>(labels.begin(), labels.size()), value, unit,
         MetricKind::gauge);
  }

 protected:
  ~MetricSink() = default;
};

enum class SampleStatus : std::uint32_t { ok, no_data };

struct SampleResult {
  SampleStatus status = SampleStatus::ok;
  std::string message;  // optional for ok (a note such as "skipped unreadable hwmon1/temp2")

  static SampleResult ok(std::string note = {}) { return {SampleStatus::ok, std::move(note)}; }
  static SampleResult no_data(std::string why) { return {SampleStatus::no_data, std::move(why)}; }
};

class Sensor {
 public:
  virtual ~Sensor() = default;
  // Take one reading. See the header comment for threading and errors.
  virtual SampleResult sample(MetricSink& sink) = 0;
};

// Handed to the factory; valid only during the factory call (copy what you keep).
struct SensorContext {
  std::string_view instance_name;  // [[sensor]] name, unique in the config
  std::string_view procfs;         // e.g. "/proc" or a fixture tree; no trailing slash
  std::string_view sysfs;          // e.g. "/sys"
  const Options& options;
  Logger& log;  // outlives the sensor object
};

using SensorFactory = std::unique_ptr<Sensor>(const SensorContext&);

}  // namespace kiwi

// Declares a sensor plugin. Use once, in one source file of the plugin:
//   KIWI_SENSOR_PLUGIN(CpuSensor, "cpu", "CPU usage, frequency and load", kOptions, kMetrics)
// CLASS must be constructible from (const kiwi::SensorContext&).
#define KIWI_SENSOR_PLUGIN(CLASS, NAME, DESCRIPTION, OPTIONS, METRICS)         \
  namespace kiwi_plugin_detail {                                               \
  const ::kiwi::PluginInfo info{::kiwi::PluginKind::sensor, NAME, DESCRIPTION, \
                                std::span<const ::kiwi::OptionSpec>(OPTIONS),  \
                                std::span<const ::kiwi::MetricSpec>(METRICS)}; \
  std::unique_ptr<::kiwi::Sensor> create(const ::kiwi::SensorContext& ctx) {   \
    return std::make_unique<CLASS>(ctx);                                       \
  }                                                                            \
  }                                                                            \
  KIWI_DETAIL_EXPORT_COMMON(kiwi_plugin_detail::info)                          \
  BOOST_DLL_ALIAS(kiwi_plugin_detail::create, kiwi_create)
