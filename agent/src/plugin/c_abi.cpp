#include "plugin/c_abi.hpp"

#include "plugin/metric_check.hpp"

#include <algorithm>
#include <cstddef>
#include <kiwi/prometheus.hpp>
#include <limits>
#include <stdexcept>

namespace kiwi::agent {

namespace {

std::string str(kiwi_str s) {
  return std::string(from_c(s));
}

// Where an output's write or a notifier's send says why, and its verdict as a WriteResult.
struct CResult {
  CResult() {
    c.size = sizeof c;
    c.ctx = &reason;
    c.reason = [](void* ctx, kiwi_str text) {
      *static_cast<std::string*>(ctx) = std::string(from_c(text));
    };
  }
  CResult(const CResult&) = delete;
  CResult& operator=(const CResult&) = delete;
  // `status` as `call` ("write", "send") returned it; a code this agent does not know is a retry.
  WriteResult verdict(std::uint32_t status, std::string_view call) {
    switch (status) {
      case KIWI_OUTPUT_OK:
        return WriteResult::ok(std::move(reason));
      case KIWI_OUTPUT_DROP:
        return WriteResult::drop(reason.empty() ? "dropped without a reason" : std::move(reason));
      case KIWI_OUTPUT_RETRY:
        return WriteResult::retry(reason.empty() ? "failed without a reason" : std::move(reason));
      default:
        return WriteResult::retry(std::string(call) + " returned unknown status " +
                                  std::to_string(status));
    }
  }
  std::string reason;
  kiwi_output_result c{};
};

}  // namespace

void check_rates(const std::vector<MetricSpec>& table) {
  for (const auto& m : table) {
    if (m.rate.empty()) continue;
    const std::string what = "metric " + std::string(m.name) + ": rate " + std::string(m.rate);
    if (m.kind != MetricKind::counter)
      throw std::runtime_error(what + " on a metric that is not a counter");
    if (!prometheus::is_sensor_metric_name(m.rate))
      throw std::runtime_error(what + " is not a valid metric name");
    const auto unit = rate_unit(m.unit);
    if (!unit)
      throw std::runtime_error(what + ": a counter in " + std::string(to_string(m.unit)) +
                               " has no per-second rate");
    auto gauge = std::find_if(table.begin(), table.end(),
                              [&](const MetricSpec& g) { return g.name == m.rate; });
    if (gauge == table.end()) throw std::runtime_error(what + " is not a row of the table");
    if (gauge->kind != MetricKind::gauge || gauge->unit != *unit || gauge->labels != m.labels)
      throw std::runtime_error(what + " must be a gauge in " + std::string(to_string(*unit)) +
                               " with the labels \"" + std::string(m.labels) + "\"");
  }
}

void check_units(const std::vector<MetricSpec>& table, std::uint32_t plugin_minor) {
  for (const auto& m : table) {
    if (is_known_unit(m.unit)) continue;
    const std::string version = std::to_string(KIWI_ABI_MAJOR) + ".";
    throw std::runtime_error(
        "metric " + std::string(m.name) + ": unit code " +
        std::to_string(static_cast<std::uint32_t>(m.unit)) + " is not one this agent knows (ABI " +
        version + std::to_string(KIWI_ABI_MINOR) + ": " + units_text() +
        "); the plugin is built for ABI " + version + std::to_string(plugin_minor) +
        (plugin_minor > KIWI_ABI_MINOR ? ": it needs a newer agent" : ""));
  }
}

Descriptor::Descriptor(const kiwi_plugin* p) : c(p) {
  if (!p) throw std::runtime_error("kiwi_plugin_v1() returned no descriptor");
  if (p->abi_major != KIWI_ABI_MAJOR)
    throw std::runtime_error("plugin built for ABI " + std::to_string(p->abi_major) + "." +
                             std::to_string(p->abi_minor) + "; this agent loads ABI " +
                             std::to_string(KIWI_ABI_MAJOR) +
                             ".x; rebuild the plugin against this agent's SDK");
  // Every member of ABI 1.0 must be there (it ends with destroy); a newer minor version may add
  // more after them, an output (1.1) needs its two, and a notifier (1.6) its two.
  constexpr std::size_t v1_0 = offsetof(kiwi_plugin, destroy) + sizeof(kiwi_plugin::destroy);
  if (p->size < v1_0)
    throw std::runtime_error("descriptor of " + std::to_string(p->size) + " bytes, ABI 1.0 has " +
                             std::to_string(v1_0));
  if (p->kind != KIWI_KIND_SENSOR && p->kind != KIWI_KIND_HANDLER && p->kind != KIWI_KIND_OUTPUT &&
      p->kind != KIWI_KIND_NOTIFIER)
    throw std::runtime_error("unknown plugin kind " + std::to_string(p->kind) +
                             (p->abi_minor > KIWI_ABI_MINOR
                                  ? " (the plugin is built for ABI 1." +
                                        std::to_string(p->abi_minor) + ": it needs a newer agent)"
                                  : ""));
  const bool sensor = p->kind == KIWI_KIND_SENSOR;
  if (p->kind == KIWI_KIND_OUTPUT) {
    if (!KIWI_HAS_MEMBER(p, kiwi_plugin, output_write) || !p->output_create || !p->output_write)
      throw std::runtime_error(
          "an output descriptor without its create and write functions (ABI 1.1)");
  } else if (p->kind == KIWI_KIND_NOTIFIER) {
    if (!KIWI_HAS_MEMBER(p, kiwi_plugin, notifier_send) || !p->notifier_create || !p->notifier_send)
      throw std::runtime_error(
          "a notifier descriptor without its create and send functions (ABI 1.6)");
  } else if (sensor ? !p->sensor_create || !p->sensor_sample
                    : !p->handler_create || !p->handler_handle) {
    throw std::runtime_error(std::string("a ") + (sensor ? "sensor" : "handler") +
                             " descriptor without its create and " +
                             (sensor ? "sample" : "handle") + " functions");
  }
  if (!p->destroy) throw std::runtime_error("a descriptor without destroy()");
  if (p->name.size == 0) throw std::runtime_error("a descriptor without a name");
  if (p->option_count && (!p->options || p->option_spec_size < KIWI_OPTION_SPEC_SIZE_1_0))
    throw std::runtime_error("option rows of " + std::to_string(p->option_spec_size) +
                             " bytes, ABI 1.0 has " + std::to_string(KIWI_OPTION_SPEC_SIZE_1_0));
  if (p->metric_count && (!p->metrics || p->metric_spec_size < KIWI_METRIC_SPEC_SIZE_1_0))
    throw std::runtime_error("metric rows of " + std::to_string(p->metric_spec_size) +
                             " bytes, ABI 1.0 has " + std::to_string(KIWI_METRIC_SPEC_SIZE_1_0));

  for (std::size_t i = 0; i < p->option_count; ++i) {
    const auto& o = abi::row_at(p->options, p->option_spec_size, i);
    if (o.type > KIWI_OPTION_STRING_TABLE)
      throw std::runtime_error("option '" + str(o.key) + "' has unknown type " +
                               std::to_string(o.type));
    options.push_back(abi::option_spec_from(o, p->option_spec_size));
  }
  for (std::size_t i = 0; i < p->metric_count; ++i) {
    const auto& m = abi::row_at(p->metrics, p->metric_spec_size, i);
    metrics.push_back(abi::metric_spec_from(m, p->metric_spec_size));
  }
  check_units(metrics, p->abi_minor);
  check_rates(metrics);
  info.kind = static_cast<PluginKind>(p->kind);
  info.name = from_c(p->name);
  info.description = from_c(p->description);
  info.options = options;
  info.metrics = metrics;
}

void keep_forever(std::shared_ptr<const void> code) {
  static auto* mutex = new std::mutex;
  static auto* kept = new std::vector<std::shared_ptr<const void>>;
  std::lock_guard lock(*mutex);
  kept->push_back(std::move(code));
}

CHost::CHost(Logger& l, std::shared_ptr<const void> c) : log(l), code(std::move(c)) {
  host.size = sizeof host;
  host.ctx = this;
  host.keep_loaded = [](void* ctx) {
    auto& self = *static_cast<CHost*>(ctx);
    std::call_once(self.kept, [&] { keep_forever(self.code); });
  };
  host.log = [](void* ctx, std::uint32_t level, kiwi_str message) {
    const auto lvl = level > KIWI_LOG_DEBUG ? LogLevel::debug : static_cast<LogLevel>(level);
    static_cast<CHost*>(ctx)->log.log(lvl, from_c(message));
  };
}

CRefusal::CRefusal() {
  c.ctx = this;
  c.refuse = [](void* ctx, kiwi_str why) {
    static_cast<CRefusal*>(ctx)->message = std::string(from_c(why));
  };
}

void* CRefusal::created(void* instance) const {
  if (!instance)
    throw std::runtime_error(message.empty() ? "create failed without a reason" : message);
  return instance;
}

namespace {

// Creates an instance of a plugin that pushes (an output, a notifier: their contexts have the
// same members) with `create`; throws std::runtime_error with its refusal.
template <class Context, class Create>
void* create_pusher(Create create, const CHost& host, const COptions& options,
                    std::string_view instance_name, std::string_view host_name,
                    std::string_view agent_version) {
  Context ctx{};
  ctx.size = sizeof ctx;
  ctx.instance_name = to_c(instance_name);
  ctx.options = options.values.data();
  ctx.option_count = options.values.size();
  ctx.host = &host.host;
  ctx.host_name = to_c(host_name);
  ctx.agent_version = to_c(agent_version);
  CRefusal refusal;
  return refusal.created(create(&ctx, &refusal.c));
}

}  // namespace

CSensor::CSensor(const kiwi_plugin& plugin, std::shared_ptr<const void> code,
                 std::string_view instance_name, std::string_view procfs, std::string_view sysfs,
                 const Options& options, Logger& log)
    : plugin_(plugin), host_(log, std::move(code)), options_(options) {
  kiwi_sensor_context ctx{};
  ctx.size = sizeof ctx;
  ctx.instance_name = to_c(instance_name);
  ctx.procfs = to_c(procfs);
  ctx.sysfs = to_c(sysfs);
  ctx.options = options_.values.data();
  ctx.option_count = options_.values.size();
  ctx.host = &host_.host;
  CRefusal refusal;
  instance_ = refusal.created(plugin_.sensor_create(&ctx, &refusal.c));
}

CSensor::~CSensor() {
  if (instance_) plugin_.destroy(instance_);
}

SampleResult CSensor::sample(MetricSink& sink) {
  struct Call {
    MetricSink& sink;
    std::string message;
    std::vector<Label> labels;
    std::uint32_t spec_size;  // the plugin's row size: what of an emitted row it wrote
  } call{sink, {}, {}, plugin_.metric_spec_size};
  kiwi_sink s{};
  s.size = sizeof s;
  s.ctx = &call;
  s.emit = [](void* ctx, const kiwi_metric_spec* m, const kiwi_label* labels, std::size_t n,
              double value) {
    auto& c = *static_cast<Call*>(ctx);
    if (!m) return;
    c.labels.clear();
    for (std::size_t i = 0; i < n; ++i)
      c.labels.push_back({from_c(labels[i].name), from_c(labels[i].value)});
    // Unit and kind as given: a code this agent does not know is the check's to refuse and name.
    c.sink.emit(abi::metric_spec_from(*m, c.spec_size), c.labels, value);
  };
  s.message = [](void* ctx, kiwi_str text) {
    static_cast<Call*>(ctx)->message = std::string(from_c(text));
  };
  s.help = [](void* ctx, kiwi_str family, kiwi_str text) {
    static_cast<Call*>(ctx)->sink.help(from_c(family), from_c(text));
  };
  const auto deadline = sink.deadline();
  s.deadline_ns =
      deadline == std::chrono::steady_clock::time_point::max()
          ? std::numeric_limits<std::int64_t>::max()
          : std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch())
                .count();
  const std::uint32_t status = plugin_.sensor_sample(instance_, &s);
  switch (status) {
    case KIWI_SAMPLE_OK:
      return SampleResult::ok(std::move(call.message));
    case KIWI_SAMPLE_NO_DATA:
      return SampleResult::no_data(std::move(call.message));
    case KIWI_SAMPLE_ERROR:
      throw std::runtime_error(call.message.empty() ? "the sample failed without a reason"
                                                    : call.message);
    default:
      throw std::runtime_error("sample returned unknown status " + std::to_string(status));
  }
}

COutput::COutput(const kiwi_plugin& plugin, std::shared_ptr<const void> code,
                 std::string_view instance_name, std::string_view host_name,
                 std::string_view agent_version, const Options& options, Logger& log)
    : plugin_(plugin), host_(log, std::move(code)), options_(options) {
  instance_ = create_pusher<kiwi_output_context>(plugin_.output_create, host_, options_,
                                                 instance_name, host_name, agent_version);
}

COutput::~COutput() {
  if (instance_) plugin_.destroy(instance_);
}

WriteResult COutput::write(const OutputBatch& batch) {
  std::size_t label_count = 0;
  for (const auto& s : batch.series) label_count += s.labels.size();
  std::vector<kiwi_label> labels;
  labels.reserve(label_count);
  std::vector<kiwi_output_series> series;
  series.reserve(batch.series.size());
  static_assert(sizeof(kiwi_output_point) == sizeof(OutputPoint) &&
                offsetof(kiwi_output_point, value) == offsetof(OutputPoint, value));
  for (const auto& s : batch.series) {
    kiwi_output_series& row = series.emplace_back();
    row.size = sizeof row;
    row.name = to_c(s.name);
    row.labels = labels.data() + labels.size();
    row.label_count = s.labels.size();
    for (const auto& [k, v] : s.labels) labels.push_back({to_c(k), to_c(v)});
    row.unit = static_cast<std::uint32_t>(s.unit);
    row.kind = static_cast<std::uint32_t>(s.kind);
    row.points = reinterpret_cast<const kiwi_output_point*>(s.points.data());
    row.point_count = s.points.size();
  }
  kiwi_output_batch c{};
  c.size = sizeof c;
  c.series = series.data();
  c.series_count = series.size();
  c.series_size = sizeof(kiwi_output_series);
  c.sample_count = batch.sample_count;
  c.oldest_ms = batch.oldest_ms;
  c.newest_ms = batch.newest_ms;
  CResult result;
  return result.verdict(plugin_.output_write(instance_, &c, &result.c), "write");
}

CNotifier::CNotifier(const kiwi_plugin& plugin, std::shared_ptr<const void> code,
                     std::string_view instance_name, std::string_view host_name,
                     std::string_view agent_version, const Options& options, Logger& log)
    : plugin_(plugin), host_(log, std::move(code)), options_(options) {
  instance_ = create_pusher<kiwi_notifier_context>(plugin_.notifier_create, host_, options_,
                                                   instance_name, host_name, agent_version);
}

CNotifier::~CNotifier() {
  if (instance_) plugin_.destroy(instance_);
}

WriteResult CNotifier::send(const Notification& notification) {
  const abi::NotificationView view(notification);
  CResult result;
  return result.verdict(plugin_.notifier_send(instance_, &view.c, &result.c), "send");
}

}  // namespace kiwi::agent
