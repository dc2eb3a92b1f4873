// kiwi-agent plugin SDK: output plugins (since ABI 1.1).
//
// An output is transport only. The agent reads its own history, keeps the cursor of what the
// receiver acknowledged (in the database), filters series, schedules, and retries with backoff;
// the output encodes one batch and sends it, and says how it went:
//   WriteResult::ok()            the receiver took it (2xx): the cursor moves past the batch;
//   WriteResult::retry("why")    not now (no connection, timeout, 5xx, 429): sent again later;
//   WriteResult::drop("why")     refused for good (another 4xx): logged, counted, skipped.
//
// Life cycle and threading:
//   - The factory runs once per [[remote_write]] entry, on the main thread. It may throw
//     std::exception to refuse the configuration (start-up exits 2, a reload changes nothing).
//   - write() runs on the output's own thread ("kiwi-o:<name>"), at most one call at a time per
//     object. It may block on the network, but should give up within its own timeout: a reload
//     and the agent's stop wait for the call in progress. A write() that throws is a retry.
//   - The object is destroyed before its shared object is unloaded.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiwi/abi.hpp"
#include "kiwi/plugin.hpp"

namespace kiwi {

struct OutputPoint {
  std::int64_t timestamp_ms;  // unix milliseconds of the tick
  double value;               // base units
};

// One series of a batch: the stored name ("cpu_usage_ratio", without the "kiwi_" prefix that
// /metrics adds), labels sorted by name, points oldest first.
struct OutputSeries {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;
  Unit unit = Unit::none;
  MetricKind kind = MetricKind::gauge;
  std::vector<OutputPoint> points;
};

// Samples of whole ticks, [oldest_ms, newest_ms].
struct OutputBatch {
  std::vector<OutputSeries> series;
  std::size_t sample_count = 0;
  std::int64_t oldest_ms = 0;
  std::int64_t newest_ms = 0;
};

enum class WriteStatus : std::uint32_t {
  ok = KIWI_OUTPUT_OK,
  retry = KIWI_OUTPUT_RETRY,
  drop = KIWI_OUTPUT_DROP
};

struct WriteResult {
  WriteStatus status = WriteStatus::ok;
  std::string reason;
  static WriteResult ok(std::string note = {}) { return {WriteStatus::ok, std::move(note)}; }
  static WriteResult retry(std::string why) { return {WriteStatus::retry, std::move(why)}; }
  static WriteResult drop(std::string why) { return {WriteStatus::drop, std::move(why)}; }
};

class Output {
 public:
  virtual ~Output() = default;
  // Send one batch; see the header comment for threading and results.
  virtual WriteResult write(const OutputBatch& batch) = 0;
};

// Handed to the factory; valid only during the factory call (copy what you keep).
struct OutputContext {
  std::string_view instance_name;  // [[remote_write]] name, unique in the config
  std::string_view host_name;      // gethostname(), the default `instance` label
  std::string_view agent_version;
  const Options& options;
  Logger& log;  // outlives the object
};

}  // namespace kiwi

namespace kiwi::abi {

struct OutputBox {
  explicit OutputBox(const kiwi_output_context* c)
      : log(c->host), options(options_from(c->options, c->option_count)) {}
  HostLogger log;
  Options options;
  std::unique_ptr<Output> output;  // goes first: it may log in its destructor
  ~OutputBox() { output.reset(); }
};

template <class Class>
void* create_output(const kiwi_output_context* c, const kiwi_refusal* refusal) noexcept {
  return refusing(refusal, [&]() -> void* {
    auto box = std::make_unique<OutputBox>(c);
    const OutputContext ctx{view(c->instance_name), view(c->host_name), view(c->agent_version),
                            box->options, box->log};
    box->output = std::make_unique<Class>(ctx);
    return box.release();
  });
}

// The C batch as an OutputBatch (copied: a batch is sent once, and encoding dwarfs the copy).
inline OutputBatch batch_from(const kiwi_output_batch& c) {
  OutputBatch b;
  b.sample_count = c.sample_count;
  b.oldest_ms = c.oldest_ms;
  b.newest_ms = c.newest_ms;
  b.series.reserve(c.series_count);
  for (std::size_t i = 0; i < c.series_count; ++i) {
    const auto& s = *reinterpret_cast<const kiwi_output_series*>(
        reinterpret_cast<const unsigned char*>(c.series) + i * c.series_size);
    OutputSeries& out = b.series.emplace_back();
    out.name = std::string(view(s.name));
    for (std::size_t j = 0; j < s.label_count; ++j)
      out.labels.emplace_back(view(s.labels[j].name), view(s.labels[j].value));
    out.unit = static_cast<Unit>(s.unit);
    out.kind = kind_from(s.kind);
    out.points.reserve(s.point_count);
    for (std::size_t j = 0; j < s.point_count; ++j)
      out.points.push_back({s.points[j].timestamp_ms, s.points[j].value});
  }
  return b;
}

// Calls `send` (an output's write, a notifier's send: a WriteResult) and answers as the C ABI
// does: its status, its reason to result->reason; an exception is a retry with its what().
template <class Send>
std::uint32_t answer(const kiwi_output_result* result, Send&& send) noexcept {
  auto reason = [&](std::string_view text) {
    if (!text.empty()) result->reason(result->ctx, str(text));
  };
  try {
    WriteResult r = send();
    reason(r.reason);
    return static_cast<std::uint32_t>(r.status);
  } catch (const std::exception& e) {
    reason(e.what());
  } catch (...) {
    reason("an exception that is not a std::exception");
  }
  return KIWI_OUTPUT_RETRY;
}

inline std::uint32_t write_output(void* instance, const kiwi_output_batch* batch,
                                  const kiwi_output_result* result) noexcept {
  return answer(
      result, [&] { return static_cast<OutputBox*>(instance)->output->write(batch_from(*batch)); });
}

inline void destroy_output(void* instance) noexcept {
  delete static_cast<OutputBox*>(instance);
}

template <class Class>
const kiwi_plugin* output_descriptor(std::string_view name, std::string_view description,
                                     std::span<const OptionSpec> options) {
  Functions fn;
  fn.output_create = &create_output<Class>;
  fn.output_write = &write_output;
  fn.destroy = &destroy_output;
  static const Descriptor d(PluginKind::output, name, description, options, no_metrics, fn);
  return &d.plugin;
}

}  // namespace kiwi::abi

// Declares an output plugin. Use once, in one source file of the plugin:
//   KIWI_OUTPUT_PLUGIN(RemoteWrite, "remote_write", "Prometheus remote write 1.0", kOptions)
// CLASS must be constructible from (const kiwi::OutputContext&).
#define KIWI_OUTPUT_PLUGIN(CLASS, NAME, DESCRIPTION, OPTIONS)                                   \
  extern "C" KIWI_PLUGIN_EXPORT const kiwi_plugin* kiwi_plugin_v1(void) {                       \
    return ::kiwi::abi::output_descriptor<CLASS>(NAME, DESCRIPTION,                             \
                                                 std::span<const ::kiwi::OptionSpec>(OPTIONS)); \
  }
