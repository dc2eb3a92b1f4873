// kiwi-agent plugin SDK: the C views of kiwi/plugin.h and the C++ values they stand for, both
// directions side by side. The agent builds the views of its data (snapshot, counters, history,
// series names, alert instances), of a plugin's options and of the notifications it hands a
// notifier, and reads back the option and metric tables and the history queries a plugin hands it;
// the SDK's glue (kiwi/abi.hpp, kiwi/handler_abi.hpp) does the opposite. Both use this one file, so
// a member added to the model and to the ABI is written here once for each direction, next to
// each other.
//
// C++ -> C: a *View holds what its C rows point into (or, where said, points into the value it
//   was made from, which must outlive it); not copyable, as the rows point into it.
// C -> C++: a *_from function copies out of the view (the view goes at its release), reading a
//   member of a later ABI minor only when the struct's `size`, or the row size the other side
//   states, covers it (KIWI_HAS_MEMBER); otherwise the member keeps its default.
#pragma once

#include <kiwi/plugin.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiwi/model.hpp"
#include "kiwi/plugin.hpp"

namespace kiwi::abi {

// The C++ enums are the C ABI's codes, so they cross as they are.
static_assert(static_cast<std::uint32_t>(SensorState::ok) == KIWI_SENSOR_OK &&
              static_cast<std::uint32_t>(SensorState::no_data) == KIWI_SENSOR_NO_DATA &&
              static_cast<std::uint32_t>(SensorState::error) == KIWI_SENSOR_ERROR);
static_assert(static_cast<std::uint32_t>(Aggregate::mean) == KIWI_AGGREGATE_MEAN &&
              static_cast<std::uint32_t>(Aggregate::last) == KIWI_AGGREGATE_LAST);
static_assert(static_cast<std::uint32_t>(AlertState::inactive) == KIWI_ALERT_INACTIVE &&
              static_cast<std::uint32_t>(AlertState::pending) == KIWI_ALERT_PENDING &&
              static_cast<std::uint32_t>(AlertState::firing) == KIWI_ALERT_FIRING &&
              static_cast<std::uint32_t>(AlertState::resolved) == KIWI_ALERT_RESOLVED);
static_assert(static_cast<std::uint32_t>(Severity::info) == KIWI_SEVERITY_INFO &&
              static_cast<std::uint32_t>(Severity::warning) == KIWI_SEVERITY_WARNING &&
              static_cast<std::uint32_t>(Severity::critical) == KIWI_SEVERITY_CRITICAL);

// A severity code as the other side wrote it; one this SDK does not know (a later minor's) reads
// as a warning, the rules' default.
inline Severity severity_from(std::uint32_t code) {
  return code <= KIWI_SEVERITY_CRITICAL ? static_cast<Severity>(code) : Severity::warning;
}

// ---- Strings and rows ----------------------------------------------------------------------

inline kiwi_str str(std::string_view s) {
  return {s.data(), s.size()};
}
inline std::string_view view(kiwi_str s) {
  return s.size ? std::string_view(s.data, s.size) : std::string_view();
}

// Row `i` of a C array whose rows are `row_size` bytes (the other side's sizeof, maybe larger
// than this SDK's: members it added at the end are skipped; or smaller: an older minor's row,
// whose later members are read only where its `size` or the row size covers them).
template <class Row>
const Row& row_at(const Row* rows, std::size_t row_size, std::size_t i) {
  return *reinterpret_cast<const Row*>(reinterpret_cast<const unsigned char*>(rows) + i * row_size);
}

inline std::vector<std::pair<std::string, std::string>> labels_from(const kiwi_label* labels,
                                                                    std::size_t count) {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i)
    out.emplace_back(view(labels[i].name), view(labels[i].value));
  return out;
}

// Appends the C rows of `labels` to `out` (reserved by the caller: earlier rows stay where they
// are) and returns the first.
inline const kiwi_label* push_labels(
    std::vector<kiwi_label>& out, const std::vector<std::pair<std::string, std::string>>& labels) {
  const std::size_t first = out.size();
  for (const auto& [name, value] : labels) out.push_back({str(name), str(value)});
  return out.data() + first;
}

// The C code of a unit the agent stored by name (a name it does not know cannot have been
// stored: the metric check refused it).
inline std::uint32_t unit_code(std::string_view unit) {
  return static_cast<std::uint32_t>(unit_from_string(unit).value_or(Unit::none));
}

// ---- Option rows: OptionSpec <-> kiwi_option_spec ----------------------------------------------

inline kiwi_option_spec option_row(const OptionSpec& o) {
  return {str(o.key),
          static_cast<std::uint32_t>(o.type),
          str(o.default_toml),
          str(o.description),
          o.has_range ? 1u : 0u,
          o.min,
          o.max,
          str(o.choices)};
}
// A row as a plugin declared it, in rows of `row_size` bytes (its ABI's): the strings point into
// the plugin's table; `choices` (1.3) only where its rows have it. The type code is taken as it is
// (the loader refuses one it does not know).
inline OptionSpec option_spec_from(const kiwi_option_spec& c, std::size_t row_size) {
  OptionSpec spec{view(c.key),
                  static_cast<OptionType>(c.type),
                  view(c.default_toml),
                  view(c.description),
                  c.has_range != 0,
                  c.min,
                  c.max};
  if (row_size >= offsetof(kiwi_option_spec, choices) + sizeof c.choices)
    spec.choices = view(c.choices);
  return spec;
}

// ---- Metric rows: MetricSpec <-> kiwi_metric_spec ----------------------------------------------

inline kiwi_metric_spec metric_row(const MetricSpec& m) {
  return {str(m.name),
          static_cast<std::uint32_t>(m.unit),
          static_cast<std::uint32_t>(m.kind),
          str(m.labels),
          str(m.help),
          str(m.rate)};
}
// A row of `row_size` bytes (the metric_spec_size its writer states): `rate` (ABI 1.1) is read
// only when the row has it. The strings point into the row's; unit and kind codes are taken as
// they are (the metric check refuses one it does not know, and names it).
inline MetricSpec metric_spec_from(const kiwi_metric_spec& c, std::size_t row_size) {
  MetricSpec spec{view(c.name), static_cast<Unit>(c.unit), static_cast<MetricKind>(c.kind),
                  view(c.labels), view(c.help)};
  if (row_size >= offsetof(kiwi_metric_spec, rate) + sizeof c.rate) spec.rate = view(c.rate);
  return spec;
}

// ---- Option values: Options <-> kiwi_option_value ----------------------------------------------

// The validated options as kiwi_option_value rows; points into `options`, which must outlive it.
// DURATION and SIZE go in `integer` (milliseconds, bytes); STRING_TABLE as key, value, ... in
// `strings`.
struct OptionValuesView {
  explicit OptionValuesView(const Options& options) {
    values.reserve(options.values().size());
    lists.reserve(options.values().size());
    for (const auto& v : options.values()) {
      kiwi_option_value c{};
      c.key = str(v.key);
      c.type = static_cast<std::uint32_t>(v.type);
      c.boolean = v.boolean;
      c.integer = v.type == OptionType::duration ? static_cast<std::int64_t>(v.duration.count())
                  : v.type == OptionType::size   ? static_cast<std::int64_t>(v.size)
                                                 : v.integer;
      c.number = v.number;
      c.string = str(v.string);
      auto& list = lists.emplace_back();
      for (const auto& s : v.string_list) list.push_back(str(s));
      for (const auto& [k, val] : v.table) {
        list.push_back(str(k));
        list.push_back(str(val));
      }
      c.strings = list.data();
      c.string_count = list.size();
      values.push_back(c);
    }
  }
  OptionValuesView(const OptionValuesView&) = delete;
  OptionValuesView& operator=(const OptionValuesView&) = delete;
  std::vector<kiwi_option_value> values;
  std::vector<std::vector<kiwi_str>> lists;
};

// The agent's validated option rows as kiwi::Options.
inline Options options_from(const kiwi_option_value* values, std::size_t count) {
  std::vector<OptionValue> out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const auto& c = values[i];
    OptionValue v;
    v.key = std::string(view(c.key));
    v.type = static_cast<OptionType>(c.type);
    v.boolean = c.boolean != 0;
    v.integer = c.integer;
    v.number = c.number;
    v.string = std::string(view(c.string));
    if (v.type == OptionType::string_table) {
      for (std::size_t j = 0; j + 1 < c.string_count; j += 2)
        v.table.emplace_back(view(c.strings[j]), view(c.strings[j + 1]));
    } else {
      for (std::size_t j = 0; j < c.string_count; ++j)
        v.string_list.emplace_back(view(c.strings[j]));
    }
    v.duration = std::chrono::milliseconds(c.integer);
    v.size = static_cast<std::uint64_t>(c.integer);
    out.push_back(std::move(v));
  }
  return Options(std::move(out));
}

// ---- The snapshot: Snapshot <-> kiwi_snapshot --------------------------------------------------

// The C view of one published snapshot: the rows point into `snap`, which it holds.
struct SnapshotView {
  explicit SnapshotView(std::shared_ptr<const Snapshot> s) : snap(std::move(s)) {
    std::size_t n_metrics = 0, n_labels = 0, n_help = 0;
    for (const auto& r : snap->sensors) {
      n_metrics += r.metrics.size();
      n_help += r.help.size();
      for (const auto& m : r.metrics) n_labels += m.labels.size();
    }
    labels.reserve(n_labels);
    metrics.reserve(n_metrics);
    help.reserve(n_help);
    sensors.reserve(snap->sensors.size());
    for (const auto& r : snap->sensors) {
      const std::size_t first = metrics.size();
      for (const auto& m : r.metrics)
        metrics.push_back({str(m.name), push_labels(labels, m.labels), m.labels.size(), m.value,
                           unit_code(m.unit), static_cast<std::uint32_t>(m.kind)});
      kiwi_sensor_report& row = sensors.emplace_back();
      row.size = sizeof row;
      row.name = str(r.name);
      row.plugin = str(r.plugin);
      row.state = static_cast<std::uint32_t>(r.state);  // ok, no_data, error: KIWI_SENSOR_*
      row.message = str(r.message);
      row.timestamp = r.timestamp;
      row.duration_seconds = r.duration_seconds;
      row.errors_total = r.errors_total;
      row.invalid_metrics_total = r.invalid_metrics_total;
      row.series_refused_total = r.series_refused_total;
      row.metrics = metrics.data() + first;
      row.metric_count = r.metrics.size();
      row.help = help.data() + help.size();
      row.help_count = r.help.size();
      row.help_size = sizeof(kiwi_metric_help);
      for (const auto& [family, text] : r.help) help.push_back({str(family), str(text)});
    }
    c.size = sizeof c;
    c.sequence = snap->sequence;
    c.timestamp = snap->timestamp;
    c.interval_seconds = snap->interval_seconds;
    c.stale_after_seconds = snap->stale_after_seconds;
    c.started_at = snap->started_at;
    c.host = str(snap->host);
    c.agent_version = str(snap->agent_version);
    c.sensors = sensors.data();
    c.sensor_count = sensors.size();
    c.sensor_report_size = sizeof(kiwi_sensor_report);
  }
  SnapshotView(const SnapshotView&) = delete;
  SnapshotView& operator=(const SnapshotView&) = delete;

  std::shared_ptr<const Snapshot> snap;
  std::vector<kiwi_label> labels;
  std::vector<kiwi_metric_value> metrics;
  std::vector<kiwi_sensor_report> sensors;
  std::vector<kiwi_metric_help> help;
  kiwi_snapshot c{};
};

// Fills `s` with the agent's snapshot view `c` (copied: the view goes at release), reusing what
// `s` already holds: a snapshot filled before, of the same sensors and series, takes in a new
// sample without allocating (each string and row is assigned over its own storage).
inline void assign_snapshot(Snapshot& s, const kiwi_snapshot& c) {
  s.sequence = c.sequence;
  s.timestamp = c.timestamp;
  s.interval_seconds = c.interval_seconds;
  s.stale_after_seconds = c.stale_after_seconds;
  s.started_at = c.started_at;
  s.host.assign(view(c.host));
  s.agent_version.assign(view(c.agent_version));
  s.sensors.resize(c.sensor_count);
  for (std::size_t i = 0; i < c.sensor_count; ++i) {
    const auto& r = row_at(c.sensors, c.sensor_report_size, i);
    SensorReport& out = s.sensors[i];
    out.name.assign(view(r.name));
    out.plugin.assign(view(r.plugin));
    out.state = r.state == KIWI_SENSOR_OK        ? SensorState::ok
                : r.state == KIWI_SENSOR_NO_DATA ? SensorState::no_data
                                                 : SensorState::error;
    out.message.assign(view(r.message));
    out.timestamp = r.timestamp;
    out.duration_seconds = r.duration_seconds;
    out.errors_total = r.errors_total;
    out.invalid_metrics_total = r.invalid_metrics_total;
    out.series_refused_total =
        KIWI_HAS_MEMBER(&r, kiwi_sensor_report, series_refused_total) ? r.series_refused_total : 0;
    out.metrics.resize(r.metric_count);
    for (std::size_t j = 0; j < r.metric_count; ++j) {
      const auto& m = r.metrics[j];
      MetricValue& v = out.metrics[j];
      v.name.assign(view(m.name));
      v.labels.resize(m.label_count);
      for (std::size_t k = 0; k < m.label_count; ++k) {
        v.labels[k].first.assign(view(m.labels[k].name));
        v.labels[k].second.assign(view(m.labels[k].value));
      }
      v.value = m.value;
      v.unit.assign(to_string(static_cast<Unit>(m.unit)));
      v.kind = kind_from(m.kind);
    }
    const std::size_t n_help =
        KIWI_HAS_MEMBER(&r, kiwi_sensor_report, help_size) ? r.help_count : 0;
    out.help.resize(n_help);
    for (std::size_t j = 0; j < n_help; ++j) {
      const auto& h = row_at(r.help, r.help_size, j);
      out.help[j].first.assign(view(h.family));
      out.help[j].second.assign(view(h.text));
    }
  }
}

// The agent's snapshot view as a Snapshot the plugin owns (copied: the view goes at release).
inline std::shared_ptr<const Snapshot> snapshot_from(const kiwi_snapshot& c) {
  auto s = std::make_shared<Snapshot>();
  assign_snapshot(*s, c);
  return s;
}

// ---- The agent's counters: AgentStats <-> kiwi_stats -------------------------------------------

// The C view of a copy of the counters, which it holds. A plugin's metric rows point into its
// table, which the PluginStatus' `library` keeps loaded.
struct StatsView {
  explicit StatsView(AgentStats s) : stats(std::move(s)) {
    std::size_t n = 0;
    for (const auto& p : stats.plugins) n += p.metrics.size();
    specs.reserve(n);
    for (const auto& p : stats.plugins) {
      const std::size_t first = specs.size();
      for (const auto& m : p.metrics) specs.push_back(metric_row(m));
      kiwi_plugin_status& row = plugins.emplace_back();
      row.size = sizeof row;
      row.name = str(p.name);
      row.kind = static_cast<std::uint32_t>(p.kind);
      row.plugin = str(p.plugin);
      row.file = str(p.file);
      row.abi_major = p.abi_major;
      row.abi_minor = p.abi_minor;
      row.metrics = specs.data() + first;
      row.metric_count = p.metrics.size();
      row.metric_spec_size = sizeof(kiwi_metric_spec);
    }
    for (const auto& r : stats.http_requests) requests.push_back({str(r.route), r.status, r.count});
    for (const auto& o : stats.outputs) {
      kiwi_output_status& row = outputs.emplace_back();
      row.size = sizeof row;
      row.name = str(o.name);
      row.plugin = str(o.plugin);
      row.state = str(o.state);
      row.interval_seconds = o.interval_seconds;
      row.acked_at = o.acked_at;
      row.seconds_behind = o.seconds_behind;
      row.samples_pending = o.samples_pending;
      row.samples_sent_total = o.samples_sent_total;
      row.batches_sent_total = o.batches_sent_total;
      row.batches_dropped_total = o.batches_dropped_total;
      row.samples_dropped_total = o.samples_dropped_total;
      row.failures_total = o.failures_total;
      row.last_error = str(o.last_error);
      row.last_error_at = o.last_error_at;
    }
    for (const auto& n : stats.notifiers) {
      kiwi_notifier_status& row = notifiers.emplace_back();
      row.size = sizeof row;
      row.name = str(n.name);
      row.kind = str(n.kind);
      row.state = str(n.state);
      row.queued = n.queued;
      row.sent_total = n.sent_total;
      row.failures_total = n.failures_total;
      row.dropped_total = n.dropped_total;
      row.last_sent_at = n.last_sent_at;
      row.last_error = str(n.last_error);
      row.last_error_at = n.last_error_at;
    }
    c.size = sizeof c;
    c.version = str(stats.version);
    c.started_at = stats.started_at;
    c.ticks = stats.ticks;
    c.missed_ticks = stats.missed_ticks;
    c.store_write_errors = stats.store_write_errors;
    c.store_failing_writes = stats.store_failing_writes;
    c.store_last_error = str(stats.store_last_error);
    c.snapshot_file = str(stats.snapshot_file);
    c.snapshot_file_errors = stats.snapshot_file_errors;
    c.snapshot_file_failing = stats.snapshot_file_failing;
    c.snapshot_file_last_error = str(stats.snapshot_file_last_error);
    c.plugins = plugins.data();
    c.plugin_count = plugins.size();
    c.plugin_status_size = sizeof(kiwi_plugin_status);
    c.http_requests = requests.data();
    c.http_request_count = requests.size();
    c.config_generation = stats.config.generation;
    c.config_loaded_at = stats.config.loaded_at;
    c.config_source = str(stats.config.source);
    c.reload_status = str(stats.config.reload_status);
    c.reload_at = stats.config.reload_at;
    c.reload_message = str(stats.config.reload_message);
    c.reloads_ok = stats.config.reloads_ok;
    c.reloads_failed = stats.config.reloads_failed;
    c.outputs = outputs.data();
    c.output_count = outputs.size();
    c.output_status_size = sizeof(kiwi_output_status);
    c.store_recovered = str(stats.store_recovered);
    c.store_samples_pending = stats.store_samples_pending;
    c.http_auth_failures = stats.http_auth_failures;
    c.http_auth_rate_limited = stats.http_auth_rate_limited;
    c.alerts_firing = stats.alerts_firing;
    c.alerts_pending = stats.alerts_pending;
    c.notifiers = notifiers.data();
    c.notifier_count = notifiers.size();
    c.notifier_status_size = sizeof(kiwi_notifier_status);
  }
  StatsView(const StatsView&) = delete;
  StatsView& operator=(const StatsView&) = delete;

  AgentStats stats;
  std::vector<kiwi_metric_spec> specs;
  std::vector<kiwi_plugin_status> plugins;
  std::vector<kiwi_request_count> requests;
  std::vector<kiwi_output_status> outputs;
  std::vector<kiwi_notifier_status> notifiers;
  kiwi_stats c{};
};

// A plugin's metric table copied out of a stats view: PluginStatus::metrics points into it, and
// PluginStatus::library keeps it as long as any copy of that status lives.
struct MetricTable {
  std::vector<std::string> text;  // reserved up front: `specs` points into these strings
  std::vector<MetricSpec> specs;
};

// The counters of a stats view, copied. Members of ABI 1.1, 1.2 and 1.6 keep their defaults
// (none, 0 and "") when the view's `size` does not cover them.
inline AgentStats stats_from(const kiwi_stats& c) {
  AgentStats s;
  s.version = std::string(view(c.version));
  s.started_at = c.started_at;
  s.ticks = c.ticks;
  s.missed_ticks = c.missed_ticks;
  s.store_write_errors = c.store_write_errors;
  s.store_failing_writes = c.store_failing_writes;
  s.store_last_error = std::string(view(c.store_last_error));
  s.snapshot_file = std::string(view(c.snapshot_file));
  s.snapshot_file_errors = c.snapshot_file_errors;
  s.snapshot_file_failing = c.snapshot_file_failing;
  s.snapshot_file_last_error = std::string(view(c.snapshot_file_last_error));
  s.plugins.reserve(c.plugin_count);
  for (std::size_t i = 0; i < c.plugin_count; ++i) {
    const auto& p = row_at(c.plugins, c.plugin_status_size, i);
    PluginStatus& out = s.plugins.emplace_back();
    out.name = std::string(view(p.name));
    out.kind = static_cast<PluginKind>(p.kind);
    out.plugin = std::string(view(p.plugin));
    out.file = std::string(view(p.file));
    out.abi_major = p.abi_major;
    out.abi_minor = p.abi_minor;
    if (p.metric_count == 0) continue;
    auto table = std::make_shared<MetricTable>();
    table->text.reserve(4 * p.metric_count);
    table->specs.reserve(p.metric_count);
    auto keep = [&](std::string_view t) -> std::string_view { return table->text.emplace_back(t); };
    for (std::size_t j = 0; j < p.metric_count; ++j) {
      MetricSpec m = metric_spec_from(row_at(p.metrics, p.metric_spec_size, j), p.metric_spec_size);
      m.name = keep(m.name);
      m.labels = keep(m.labels);
      m.help = keep(m.help);
      m.rate = keep(m.rate);
      table->specs.push_back(m);
    }
    out.metrics = table->specs;
    out.library = std::move(table);
  }
  s.http_requests.reserve(c.http_request_count);
  for (std::size_t i = 0; i < c.http_request_count; ++i) {
    const auto& r = c.http_requests[i];
    s.http_requests.push_back({std::string(view(r.route)), r.status, r.count});
  }
  s.config.generation = c.config_generation;
  s.config.loaded_at = c.config_loaded_at;
  s.config.source = std::string(view(c.config_source));
  s.config.reload_status = std::string(view(c.reload_status));
  s.config.reload_at = c.reload_at;
  s.config.reload_message = std::string(view(c.reload_message));
  s.config.reloads_ok = c.reloads_ok;
  s.config.reloads_failed = c.reloads_failed;
  if (KIWI_HAS_MEMBER(&c, kiwi_stats, output_status_size) && c.outputs)
    for (std::size_t i = 0; i < c.output_count; ++i) {
      const auto& o = row_at(c.outputs, c.output_status_size, i);
      OutputStatus& out = s.outputs.emplace_back();
      out.name = std::string(view(o.name));
      out.plugin = std::string(view(o.plugin));
      out.state = std::string(view(o.state));
      out.interval_seconds = o.interval_seconds;
      out.acked_at = o.acked_at;
      out.seconds_behind = o.seconds_behind;
      out.samples_pending = o.samples_pending;
      out.samples_sent_total = o.samples_sent_total;
      out.batches_sent_total = o.batches_sent_total;
      out.batches_dropped_total = o.batches_dropped_total;
      out.samples_dropped_total = o.samples_dropped_total;
      out.failures_total = o.failures_total;
      out.last_error = std::string(view(o.last_error));
      out.last_error_at = o.last_error_at;
    }
  if (KIWI_HAS_MEMBER(&c, kiwi_stats, store_samples_pending)) {
    s.store_recovered = std::string(view(c.store_recovered));
    s.store_samples_pending = c.store_samples_pending;
  }
  if (KIWI_HAS_MEMBER(&c, kiwi_stats, http_auth_rate_limited)) {
    s.http_auth_failures = c.http_auth_failures;
    s.http_auth_rate_limited = c.http_auth_rate_limited;
  }
  if (KIWI_HAS_MEMBER(&c, kiwi_stats, notifier_status_size)) {
    s.alerts_firing = c.alerts_firing;
    s.alerts_pending = c.alerts_pending;
    s.notifiers.reserve(c.notifier_count);
    for (std::size_t i = 0; i < c.notifier_count; ++i) {
      const auto& n = row_at(c.notifiers, c.notifier_status_size, i);
      NotifierStatus& out = s.notifiers.emplace_back();
      out.name = std::string(view(n.name));
      out.kind = std::string(view(n.kind));
      out.state = std::string(view(n.state));
      out.queued = n.queued;
      out.sent_total = n.sent_total;
      out.failures_total = n.failures_total;
      out.dropped_total = n.dropped_total;
      out.last_sent_at = n.last_sent_at;
      out.last_error = std::string(view(n.last_error));
      out.last_error_at = n.last_error_at;
    }
  }
  return s;
}

// ---- Alert instances: std::vector<Alert> <-> kiwi_alert_list (ABI 1.6) -------------------------

// The C view of a list of alert instances, which it holds.
struct AlertsView {
  explicit AlertsView(std::vector<Alert> a) : alerts(std::move(a)) {
    std::size_t n = 0;
    for (const auto& x : alerts) n += x.labels.size();
    labels.reserve(n);
    rows.reserve(alerts.size());
    for (const auto& x : alerts) {
      kiwi_alert& row = rows.emplace_back();
      row.size = sizeof row;
      row.name = str(x.name);
      row.labels = push_labels(labels, x.labels);
      row.label_count = x.labels.size();
      row.sensor = str(x.sensor);
      row.series = str(x.series);
      row.state = static_cast<std::uint32_t>(x.state);
      row.severity = static_cast<std::uint32_t>(x.severity);
      row.summary = str(x.summary);
      row.value = x.value;
      row.threshold = x.threshold;
      row.since = x.since;
      row.active_at = x.active_at;
    }
    c.size = sizeof c;
    c.alerts = rows.data();
    c.count = rows.size();
    c.alert_size = sizeof(kiwi_alert);
  }
  AlertsView(const AlertsView&) = delete;
  AlertsView& operator=(const AlertsView&) = delete;

  std::vector<Alert> alerts;
  std::vector<kiwi_label> labels;
  std::vector<kiwi_alert> rows;
  kiwi_alert_list c{};
};

// The instances of an alert list view, copied. A state or severity code of a later minor version
// is read as inactive, or warning.
inline std::vector<Alert> alerts_from(const kiwi_alert_list& c) {
  std::vector<Alert> out;
  out.reserve(c.count);
  for (std::size_t i = 0; i < c.count; ++i) {
    const auto& a = row_at(c.alerts, c.alert_size, i);
    Alert& x = out.emplace_back();
    x.name = std::string(view(a.name));
    x.labels = labels_from(a.labels, a.label_count);
    x.sensor = std::string(view(a.sensor));
    x.series = std::string(view(a.series));
    x.state =
        a.state <= KIWI_ALERT_RESOLVED ? static_cast<AlertState>(a.state) : AlertState::inactive;
    x.severity = severity_from(a.severity);
    x.summary = std::string(view(a.summary));
    x.value = a.value;
    x.threshold = a.threshold;
    x.since = a.since;
    x.active_at = a.active_at;
  }
  return out;
}

// ---- A history query: HistoryQuery <-> kiwi_history_query --------------------------------------

// The C view of a query; points into `query`, which must outlive it.
struct HistoryQueryView {
  explicit HistoryQueryView(const HistoryQuery& q) {
    patterns.reserve(q.patterns.size());
    for (const auto& p : q.patterns) patterns.push_back(str(p));
    c.size = sizeof c;
    c.limit = q.limit;
    c.has_since = q.since.has_value();
    c.since = q.since.value_or(0);
    c.has_until = q.until.has_value();
    c.until = q.until.value_or(0);
    c.patterns = patterns.data();
    c.pattern_count = patterns.size();
    c.step = q.step;
    c.aggregate = static_cast<std::uint32_t>(q.aggregate);
    c.band = q.band;
  }
  HistoryQueryView(const HistoryQueryView&) = delete;
  HistoryQueryView& operator=(const HistoryQueryView&) = delete;

  std::vector<kiwi_str> patterns;
  kiwi_history_query c{};
};

// The query as the store takes it, from a plugin built for ABI 1.`plugin_minor`; throws
// std::invalid_argument for one this side cannot read (none, a `size` smaller than ABI 1.0's, an
// unknown aggregate). `band` is read only from a plugin of 1.7 or later: in a 1.6 query its place
// is tail padding, which the query's `size` covers (kiwi/plugin.h).
inline HistoryQuery query_from(const kiwi_history_query* q,
                               std::uint32_t plugin_minor = KIWI_ABI_MINOR) {
  if (!q || q->size < KIWI_HISTORY_QUERY_SIZE_1_0)
    throw std::invalid_argument("history query of " + std::to_string(q ? q->size : 0) +
                                " bytes, ABI 1.0 has " +
                                std::to_string(KIWI_HISTORY_QUERY_SIZE_1_0));
  if (q->aggregate > KIWI_AGGREGATE_LAST)
    throw std::invalid_argument("history query with unknown aggregate " +
                                std::to_string(q->aggregate));
  HistoryQuery out;
  out.limit = q->limit;
  if (q->has_since) out.since = q->since;
  if (q->has_until) out.until = q->until;
  out.patterns.reserve(q->pattern_count);
  for (std::size_t i = 0; i < q->pattern_count; ++i)
    out.patterns.emplace_back(view(q->patterns[i]));
  out.step = q->step;
  out.aggregate = static_cast<Aggregate>(q->aggregate);
  out.band = plugin_minor >= 7 && KIWI_HAS_MEMBER(q, kiwi_history_query, band) && q->band;
  return out;
}

// ---- A history result: HistoryResult <-> kiwi_history_result -----------------------------------

// The C view of a result, which it holds, in rows of `series_size` bytes: this SDK's, or
// KIWI_HISTORY_SERIES_SIZE_1_0 for a plugin built before 1.7 (which steps through the rows by
// its own sizeof). Throws std::logic_error for a series without one value (or, with a band, one
// min and max) per timestamp.
struct HistoryView {
  explicit HistoryView(HistoryResult r, std::size_t series_size = sizeof(kiwi_history_series))
      : result(std::move(r)) {
    std::size_t n = 0;
    for (const auto& s : result.series) n += s.labels.size();
    labels.reserve(n);
    series.reserve(result.series.size());
    for (const auto& s : result.series) {
      kiwi_history_series row{};
      row.key = str(s.key);
      row.name = str(s.name);
      row.labels = push_labels(labels, s.labels);
      row.label_count = s.labels.size();
      row.unit = unit_code(s.unit);
      row.kind = static_cast<std::uint32_t>(s.kind);
      // One value per timestamp, as the store promises; a short row would be read past its end.
      if (s.values.size() != result.timestamps.size())
        throw std::logic_error("history series " + s.key + " has " +
                               std::to_string(s.values.size()) + " values for " +
                               std::to_string(result.timestamps.size()) + " timestamps");
      row.values = s.values.data();
      if (!s.min.empty() || !s.max.empty()) {
        if (s.min.size() != s.values.size() || s.max.size() != s.values.size())
          throw std::logic_error("history series " + s.key + " has " +
                                 std::to_string(s.min.size()) + " min and " +
                                 std::to_string(s.max.size()) + " max for " +
                                 std::to_string(s.values.size()) + " values");
        row.min = s.min.data();
        row.max = s.max.data();
      }
      series.push_back(row);
    }
    c.size = sizeof c;
    c.timestamps = result.timestamps.data();
    c.timestamp_count = result.timestamps.size();
    c.series = series.data();
    c.series_count = series.size();
    c.series_size = static_cast<std::uint32_t>(series_size);
    if (series_size < sizeof(kiwi_history_series)) {  // an older plugin's rows: each cut short
      narrow.resize(series.size() * series_size);
      for (std::size_t i = 0; i < series.size(); ++i)
        std::memcpy(narrow.data() + i * series_size, &series[i], series_size);
      c.series = reinterpret_cast<const kiwi_history_series*>(narrow.data());
    }
  }
  HistoryView(const HistoryView&) = delete;
  HistoryView& operator=(const HistoryView&) = delete;

  HistoryResult result;
  std::vector<kiwi_label> labels;
  std::vector<kiwi_history_series> series;
  std::vector<unsigned char> narrow;  // rows of series_size bytes, when less than this SDK's
  kiwi_history_result c{};
};

// An agent before 1.7 has no band: its rows are KIWI_HISTORY_SERIES_SIZE_1_0 bytes, and `min`
// and `max` stay empty.
inline HistoryResult history_from(const kiwi_history_result& c) {
  const std::size_t row_size = KIWI_HAS_MEMBER(&c, kiwi_history_result, series_size)
                                   ? c.series_size
                                   : KIWI_HISTORY_SERIES_SIZE_1_0;
  const bool has_band = row_size >= offsetof(kiwi_history_series, max) + sizeof(c.series->max);
  HistoryResult h;
  h.timestamps.assign(c.timestamps, c.timestamps + c.timestamp_count);
  h.series.reserve(c.series_count);
  for (std::size_t i = 0; i < c.series_count; ++i) {
    const auto& s = row_at(c.series, row_size, i);
    HistorySeries& out = h.series.emplace_back();
    out.key = std::string(view(s.key));
    out.name = std::string(view(s.name));
    out.labels = labels_from(s.labels, s.label_count);
    out.unit = std::string(to_string(static_cast<Unit>(s.unit)));
    out.kind = kind_from(s.kind);
    if (c.timestamp_count) out.values.assign(s.values, s.values + c.timestamp_count);
    if (has_band && s.min && s.max && c.timestamp_count) {
      out.min.assign(s.min, s.min + c.timestamp_count);
      out.max.assign(s.max, s.max + c.timestamp_count);
    }
  }
  return h;
}

// ---- A notification: Notification <-> kiwi_notification (ABI 1.6) -----------------------------

// The C view of a notification; points into `n`, which must outlive it.
struct NotificationView {
  explicit NotificationView(const Notification& n) {
    std::size_t n_labels = 0;
    for (const auto& a : n.alerts) n_labels += a.labels.size();
    labels.reserve(n_labels);
    alerts.reserve(n.alerts.size());
    for (const auto& a : n.alerts) {
      kiwi_alert_notice& row = alerts.emplace_back();
      row.size = sizeof row;
      row.name = str(a.name);
      row.labels = push_labels(labels, a.labels);
      row.label_count = a.labels.size();
      row.sensor = str(a.sensor);
      row.severity = static_cast<std::uint32_t>(a.severity);
      row.firing = a.firing ? 1 : 0;
      row.summary = str(a.summary);
      row.value = a.value;
      row.threshold = a.threshold;
      row.starts_at = a.starts_at;
      row.ends_at = a.ends_at;
      row.sequence = a.sequence;
    }
    c.size = sizeof c;
    c.alerts = alerts.data();
    c.alert_count = alerts.size();
    c.alert_size = sizeof(kiwi_alert_notice);
    c.repeat = n.repeat ? 1 : 0;
    c.host = str(n.host);
    c.agent_url = str(n.agent_url);
  }
  NotificationView(const NotificationView&) = delete;
  NotificationView& operator=(const NotificationView&) = delete;

  std::vector<kiwi_label> labels;
  std::vector<kiwi_alert_notice> alerts;
  kiwi_notification c{};
};

// The notification of a view, copied (the view goes when the call returns). The notification and
// its rows came with ABI 1.6 and are read whole; rows are stepped through by `alert_size` (a later
// agent's may be larger). Throws std::invalid_argument for a view smaller than 1.6's.
inline Notification notification_from(const kiwi_notification& c) {
  if (c.size < sizeof(kiwi_notification) ||
      (c.alert_count && c.alert_size < sizeof(kiwi_alert_notice)))
    throw std::invalid_argument("notification of " + std::to_string(c.size) +
                                " bytes with alert rows of " + std::to_string(c.alert_size) +
                                ", ABI 1.6 has " + std::to_string(sizeof(kiwi_notification)) +
                                " and " + std::to_string(sizeof(kiwi_alert_notice)));
  Notification n;
  n.repeat = c.repeat != 0;
  n.host = std::string(view(c.host));
  n.agent_url = std::string(view(c.agent_url));
  n.alerts.reserve(c.alert_count);
  for (std::size_t i = 0; i < c.alert_count; ++i) {
    const auto& a = row_at(c.alerts, c.alert_size, i);
    AlertNotice& out = n.alerts.emplace_back();
    out.name = std::string(view(a.name));
    out.labels = labels_from(a.labels, a.label_count);
    out.sensor = std::string(view(a.sensor));
    out.severity = severity_from(a.severity);
    out.firing = a.firing != 0;
    out.summary = std::string(view(a.summary));
    out.value = a.value;
    out.threshold = a.threshold;
    out.starts_at = a.starts_at;
    out.ends_at = a.ends_at;
    out.sequence = a.sequence;
  }
  return n;
}

// ---- Series names: std::vector<std::string> <-> kiwi_str_list ----------------------------------

// The C view of a list of names, which it holds.
struct SeriesView {
  explicit SeriesView(std::vector<std::string> n) : names(std::move(n)) {
    items.reserve(names.size());
    for (const auto& s : names) items.push_back(str(s));
    c.items = items.data();
    c.count = items.size();
  }
  SeriesView(const SeriesView&) = delete;
  SeriesView& operator=(const SeriesView&) = delete;

  std::vector<std::string> names;
  std::vector<kiwi_str> items;
  kiwi_str_list c{};
};

inline std::vector<std::string> names_from(const kiwi_str_list& list) {
  std::vector<std::string> out;
  out.reserve(list.count);
  for (std::size_t i = 0; i < list.count; ++i) out.emplace_back(view(list.items[i]));
  return out;
}

}  // namespace kiwi::abi
