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
//   - KIWI_SENSOR_PLUGIN makes the class a plugin through the C ABI (kiwi/plugin.h, kiwi/abi.hpp):
//     the agent sees C functions and tables, never these classes.
//
// Errors: "no data" (a VM without thermal zones) is a normal result: return
// SampleResult::no_data("why"). A real failure throws std::exception: the collector catches it,
// marks this sensor `error` with e.what() in the snapshot, and the other sensors go on.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiwi/abi.hpp"
#include "kiwi/plugin.hpp"

namespace kiwi {

struct Label {
  std::string_view name;
  std::string_view value;
};

// Receives the metrics of one sample. Strings are copied before emit() returns, so temporaries are
// fine. A sensor emits through the rows of its metric table (kiwi/plugin.hpp, MetricSpec):
//
//   inline constexpr kiwi::MetricSpec kCoreUsage{"cpu_core_usage_ratio", kiwi::Unit::ratio,
//                                                kiwi::MetricKind::gauge, "core", "..."};
//   sink.emit(kCoreUsage, {core}, 0.25);   // label values in the order the row names them
//   sink.emit(kLoad1, 0.5);                // a row without labels
//
// Names are stable API (snake_case, unit suffix: `_bytes`, `_ratio`, `_celsius`, `_hertz`,
// `_volts`, `_rpm`).
//
// The host checks every metric before it goes anywhere (snapshot, history, /metrics): the name
// must match [a-zA-Z_][a-zA-Z0-9_]*, each label name too (not starting with "__", no name twice;
// kiwi/prometheus.hpp has these rules, is_sensor_metric_name and is_sensor_label_name),
// label values are any text (escaped wherever they are written), the unit a known Unit, the kind
// gauge or counter, the value finite, and a series (name and labels) may appear once per sample.
// A metric that fails is dropped, counted in the sensor's `invalid_metrics_total`, and named in
// its status message; the rest of the sample is kept.
class MetricSink {
 public:
  // The one way in, which the others call: `labels` are names and values. For metrics known only
  // at run time (the exec sensor builds a MetricSpec per parsed line), or labels built in a loop.
  virtual void emit(const MetricSpec& metric, std::span<const Label> labels, double value) = 0;

  // The end of the time this sample() call has: its start plus the sensor's `timeout`. A sensor
  // that waits on something (a child process) gives up by then. time_point::max() when there is
  // none.
  virtual std::chrono::steady_clock::time_point deadline() const {
    return std::chrono::steady_clock::time_point::max();
  }

  // The HELP text of a family whose rows the sensor makes at run time (the exec sensor relays a
  // program's `# HELP` lines), for /metrics; `family` as a HELP line names it. A declared row's
  // help needs no call. An agent before ABI 1.4 ignores it.
  virtual void help(std::string_view family, std::string_view text) {
    (void)family;
    (void)text;
  }

  // A row without labels. Throws std::logic_error if the row declares labels.
  void emit(const MetricSpec& metric, double value) {
    emit(metric, std::initializer_list<std::string_view>(), value);
  }

  // Label values, in the order metric.labels names them. Throws std::logic_error (so the sample
  // is an error naming the metric) when their number is not the row's.
  void emit(const MetricSpec& metric, std::initializer_list<std::string_view> values,
            double value) {
    Label stack[8];
    std::vector<Label> heap;
    Label* out = stack;
    if (values.size() > std::size(stack)) {
      heap.resize(values.size());
      out = heap.data();
    }
    std::string_view names = metric.labels;
    std::size_t n = 0;
    for (auto v : values) {
      if (names.empty()) break;
      const std::size_t comma = std::min(names.find(','), names.size());
      out[n++] = {trim(names.substr(0, comma)), v};
      names.remove_prefix(std::min(comma + 1, names.size()));
    }
    if (n != values.size() || !names.empty())
      throw std::logic_error("metric " + std::string(metric.name) + " declares labels \"" +
                             std::string(metric.labels) + "\" but was emitted with " +
                             std::to_string(values.size()) + " label values");
    emit(metric, std::span<const Label>(out, n), value);
  }

 protected:
  ~MetricSink() = default;

 private:
  static constexpr std::string_view trim(std::string_view s) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    return s;
  }
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
  // Keeps the plugin's shared object mapped for the rest of the process (kiwi_host.keep_loaded):
  // for a sensor that leaves work behind which may run its code after it is destroyed, such as
  // a thread blocked in statvfs on a dead NFS mount. May be copied and called at any time during
  // the sensor's life, from any thread.
  std::function<void()> keep_loaded = [] {};
};

using SensorFactory = std::unique_ptr<Sensor>(const SensorContext&);

}  // namespace kiwi

namespace kiwi::abi {

// The plugin side of kiwi_sink: a MetricSink whose emit() goes to the agent.
class CSink final : public MetricSink {
 public:
  explicit CSink(const kiwi_sink* sink) : sink_(sink) {}
  using MetricSink::emit;
  void emit(const MetricSpec& metric, std::span<const Label> labels, double value) override {
    kiwi_label stack[8] = {};
    std::vector<kiwi_label> heap;
    kiwi_label* c = stack;
    if (labels.size() > std::size(stack)) {
      heap.resize(labels.size());
      c = heap.data();
    }
    for (std::size_t i = 0; i < labels.size(); ++i)
      c[i] = {str(labels[i].name), str(labels[i].value)};
    const kiwi_metric_spec row = metric_row(metric);
    sink_->emit(sink_->ctx, &row, c, labels.size(), value);
  }
  std::chrono::steady_clock::time_point deadline() const override {
    return deadline_of(sink_->deadline_ns);
  }
  void help(std::string_view family, std::string_view text) override {
    if (KIWI_HAS_MEMBER(sink_, kiwi_sink, help) && sink_->help)
      sink_->help(sink_->ctx, str(family), str(text));
  }

 private:
  const kiwi_sink* sink_;
};

// One sensor instance behind the C ABI, with what it holds on to.
struct SensorBox {
  explicit SensorBox(const kiwi_sensor_context* c)
      : log(c->host), options(options_from(c->options, c->option_count)) {}
  HostLogger log;
  Options options;
  std::unique_ptr<Sensor> sensor;  // goes first: it may log in its destructor
  ~SensorBox() { sensor.reset(); }
};

template <class Class>
void* create_sensor(const kiwi_sensor_context* c, const kiwi_refusal* refusal) noexcept {
  return refusing(refusal, [&]() -> void* {
    auto box = std::make_unique<SensorBox>(c);
    const kiwi_host* host = c->host;
    const SensorContext ctx{
        view(c->instance_name), view(c->procfs), view(c->sysfs), box->options, box->log, [host] {
          // An agent older than the member does not offer it.
          if (host->size >= offsetof(kiwi_host, keep_loaded) + sizeof host->keep_loaded &&
              host->keep_loaded)
            host->keep_loaded(host->ctx);
        }};
    box->sensor = std::make_unique<Class>(ctx);
    return box.release();
  });
}

inline std::uint32_t sample_sensor(void* instance, const kiwi_sink* sink) noexcept {
  auto message = [&](std::string_view text) {
    if (!text.empty()) sink->message(sink->ctx, str(text));
  };
  try {
    CSink out(sink);
    SampleResult r = static_cast<SensorBox*>(instance)->sensor->sample(out);
    message(r.message);
    return r.status == SampleStatus::no_data ? KIWI_SAMPLE_NO_DATA : KIWI_SAMPLE_OK;
  } catch (const std::exception& e) {
    message(e.what());
  } catch (...) {
    message("an exception that is not a std::exception");
  }
  return KIWI_SAMPLE_ERROR;
}

inline void destroy_sensor(void* instance) noexcept {
  delete static_cast<SensorBox*>(instance);
}

template <class Class>
const kiwi_plugin* sensor_descriptor(std::string_view name, std::string_view description,
                                     std::span<const OptionSpec> options,
                                     std::span<const MetricSpec> metrics) {
  Functions fn;
  fn.sensor_create = &create_sensor<Class>;
  fn.sensor_sample = &sample_sensor;
  fn.destroy = &destroy_sensor;
  static const Descriptor d(PluginKind::sensor, name, description, options, metrics, fn);
  return &d.plugin;
}

}  // namespace kiwi::abi

// Declares a sensor plugin. Use once, in one source file of the plugin:
//   KIWI_SENSOR_PLUGIN(CpuSensor, "cpu", "CPU usage, frequency and load", kOptions, kMetrics)
// CLASS must be constructible from (const kiwi::SensorContext&). It defines the plugin's one
// exported symbol, kiwi_plugin_v1 (kiwi/plugin.h).
#define KIWI_SENSOR_PLUGIN(CLASS, NAME, DESCRIPTION, OPTIONS, METRICS)                          \
  extern "C" KIWI_PLUGIN_EXPORT const kiwi_plugin* kiwi_plugin_v1(void) {                       \
    return ::kiwi::abi::sensor_descriptor<CLASS>(NAME, DESCRIPTION,                             \
                                                 std::span<const ::kiwi::OptionSpec>(OPTIONS),  \
                                                 std::span<const ::kiwi::MetricSpec>(METRICS)); \
  }
