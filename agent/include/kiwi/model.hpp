// kiwi-agent plugin SDK: the data model. What a sample is (MetricValue, SensorReport, Snapshot),
// what the agent says of itself (AgentStats and the statuses in it) and what a history query asks
// and answers. The host's layers and the handlers share these types; none of them crosses the C
// ABI itself (kiwi/plugin.h has the C views, kiwi/views.hpp converts both ways).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiwi/plugin.hpp"

namespace kiwi {

struct MetricValue {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0;
  std::string unit;
  MetricKind kind = MetricKind::gauge;
};

enum class SensorState : std::uint32_t { ok, no_data, error };

inline std::string_view to_string(SensorState s) {
  return s == SensorState::ok ? "ok" : s == SensorState::no_data ? "no_data" : "error";
}

struct SensorReport {
  std::string name;    // [[sensor]] name
  std::string plugin;  // plugin name
  SensorState state = SensorState::ok;
  std::string message;
  double timestamp = 0;                     // unix seconds of this sensor's last reading
  double duration_seconds = 0;              // how long its last sample() took, whole µs
  std::uint64_t errors_total = 0;           // samples that threw since the agent started
  std::uint64_t invalid_metrics_total = 0;  // metrics the host dropped (kiwi/sensor.hpp rules)
  std::uint64_t series_refused_total = 0;   // values of series beyond the sensor's series limit
  std::vector<MetricValue> metrics;
  // HELP texts of the families its plugin made at run time (an exec program's # HELP lines):
  // family, text. A declared row's help is in its plugin's table.
  std::vector<std::pair<std::string, std::string>> help;
};

// The name of the report the agent makes of itself (its own telemetry, one more report of every
// snapshot) and of its plugin: no [[sensor]] may be named so.
inline constexpr std::string_view kAgentReport = "agent";
// The report of the alert rules (alert_firing), made after the agent's: no [[sensor]] may be named
// so either.
inline constexpr std::string_view kAlertsReport = "alerts";

// The latest sample, immutable once published. kiwi/json.hpp render_snapshot_json makes the
// /api/current body of it.
struct Snapshot {
  std::uint64_t sequence = 0;  // 1 for the first sample; the ETag of /api/current
  double timestamp = 0;        // unix seconds of the tick
  double interval_seconds = 1;
  double stale_after_seconds = 3;
  std::string host;
  std::string agent_version;
  double started_at = 0;  // unix seconds the agent started (uptime = timestamp - started_at)
  std::vector<SensorReport> sensors;
};

// A loaded plugin instance, for /api/plugins.
struct PluginStatus {
  std::string name;  // sensor instance name, or the route path for a handler
  PluginKind kind = PluginKind::sensor;
  std::string plugin;  // the plugin's own name
  std::string file;
  std::uint32_t abi_major = 0;  // the C ABI (kiwi/plugin.h) it was built for
  std::uint32_t abi_minor = 0;
  std::span<const MetricSpec> metrics;  // the plugin's metric table (valid while it is loaded)
  std::shared_ptr<const void> library;  // keeps the plugin loaded while this copy lives
};

struct HttpRequestCount {
  std::string route;  // configured route path; "unmatched" for 404s
  int status = 0;
  std::uint64_t count = 0;
};

// The configuration in force, and how the latest reload (SIGHUP) went.
struct ConfigStatus {
  std::uint64_t generation = 1;        // 1 at start; +1 for every reload that applied
  double loaded_at = 0;                // unix seconds the running configuration took effect
  std::string source;                  // its file, or "<built-in default>"
  std::string reload_status = "none";  // "none" (never reloaded), "ok" or "failed"
  double reload_at = 0;                // unix seconds of the latest reload (0: none)
  std::string reload_message;          // a failed reload's error, as --check-config words it
  std::uint64_t reloads_ok = 0;
  std::uint64_t reloads_failed = 0;
};

// One output ([[remote_write]]) and its backlog (kiwi_output_status).
struct OutputStatus {
  std::string name;
  std::string plugin;
  std::string state;  // "starting", "live", "catching_up", "retrying"
  double interval_seconds = 0;
  double acked_at = 0;        // unix seconds of the newest sample the receiver took (0: none)
  double seconds_behind = 0;  // newest stored sample minus acked_at
  std::uint64_t samples_pending = 0;
  std::uint64_t samples_sent_total = 0;
  std::uint64_t batches_sent_total = 0;
  std::uint64_t batches_dropped_total = 0;
  std::uint64_t samples_dropped_total = 0;
  std::uint64_t failures_total = 0;
  std::string last_error;
  double last_error_at = 0;
};

// ---- Alerts ([[alert]] rules, since ABI 1.6) ------------------------------------------------

// An alert's state (docs/alerts.md): inactive (the condition does not hold), pending (it holds,
// not yet for the rule's `for`), firing, resolved (it fired and the condition has cleared past the
// rule's hysteresis; shown as resolved until it holds again or the agent forgets it).
enum class AlertState : std::uint32_t { inactive = 0, pending = 1, firing = 2, resolved = 3 };

inline std::string_view to_string(AlertState s) {
  switch (s) {
    case AlertState::inactive:
      return "inactive";
    case AlertState::pending:
      return "pending";
    case AlertState::firing:
      return "firing";
    case AlertState::resolved:
      return "resolved";
  }
  return "inactive";
}

enum class Severity : std::uint32_t { info = 0, warning = 1, critical = 2 };

inline std::string_view to_string(Severity s) {
  return s == Severity::info ? "info" : s == Severity::warning ? "warning" : "critical";
}

// Its inverse, for the configuration's words (a rule's severity, a notifier's min_severity, which
// the configuration has checked): "info", "critical", anything else a warning.
inline Severity severity_named(std::string_view word) {
  return word == "info"       ? Severity::info
         : word == "critical" ? Severity::critical
                              : Severity::warning;
}

// One instance of a rule: the rule and the labels of the series (or sensor) it matched. What
// /api/alerts lists (every instance not inactive) and the dashboard shows.
struct Alert {
  std::string name;  // the rule's name: Prometheus's `alertname`
  // The matched series' labels, sorted by name (a status rule's: none).
  std::vector<std::pair<std::string, std::string>> labels;
  // The report the series came from: the [[sensor]] name, or "agent" (the dashboard's card).
  std::string sensor;
  std::string series;  // the watched series' key (`thermal_celsius{zone="soc"}`), or the sensor
  AlertState state = AlertState::inactive;
  Severity severity = Severity::warning;
  std::string summary;   // the rule's summary rendered with this instance's labels and value
  double value = 0;      // the latest value the rule looked at (NaN: none, e.g. stale)
  double threshold = 0;  // what it was compared with (NaN: none, e.g. a status rule)
  double since = 0;      // unix seconds it entered its state
  double active_at = 0;  // unix seconds the condition began to hold (startsAt); 0 when inactive
};

// What a notifier is handed: transitions of alert instances, oldest first, or (repeat) the
// instances firing now, sent again while they fire.
struct AlertNotice {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // sorted by name
  std::string sensor;                                       // the report (Alert::sensor)
  Severity severity = Severity::warning;
  bool firing = true;  // false: resolved
  std::string summary;
  double value = 0;
  double threshold = 0;  // NaN when none
  double starts_at = 0;  // unix seconds the condition began to hold
  // Resolved: unix seconds it resolved. Firing: how long the receiver may hold it as firing
  // without hearing from the agent again (Alertmanager's endsAt); 0 when the agent names none.
  double ends_at = 0;
  std::uint64_t sequence = 0;  // the transition's number in the agent's event log (0: a repeat)
};

struct Notification {
  std::vector<AlertNotice> alerts;
  bool repeat = false;    // a reminder of what fires, not a change
  std::string host;       // the agent's host name (the `instance` label)
  std::string agent_url;  // where the agent's dashboard is, as configured ("" when unknown)
};

// One notifier ([[notify]]) and its queue.
struct NotifierStatus {
  std::string name;
  std::string kind;              // "alertmanager", "webhook", "ntfy", or a plugin's name
  std::string state;             // "idle", "sending", "retrying"
  std::uint64_t queued = 0;      // transitions waiting to be sent
  std::uint64_t sent_total = 0;  // notifications the receiver took
  std::uint64_t failures_total = 0;
  std::uint64_t dropped_total = 0;  // refused for good (a 4xx), skipped
  double last_sent_at = 0;
  std::string last_error;
  double last_error_at = 0;
};

// Counters of the running agent, for /api/health, /api/plugins and /metrics.
struct AgentStats {
  std::string version;
  double started_at = 0;  // unix seconds
  std::uint64_t ticks = 0;
  std::uint64_t missed_ticks = 0;
  std::uint64_t store_write_errors = 0;    // since start
  std::uint64_t store_failing_writes = 0;  // history commits failed in a row (0 = healthy)
  std::string store_last_error;
  std::string store_recovered;              // a damaged history file replaced since start ("")
  std::uint64_t store_samples_pending = 0;  // samples queued, not yet committed
  std::string snapshot_file;                // collector.snapshot_path ("" when off)
  std::uint64_t snapshot_file_errors = 0;   // failed writes since start
  std::uint64_t snapshot_file_failing = 0;  // failed in a row (0 = healthy)
  std::string snapshot_file_last_error;
  std::vector<PluginStatus> plugins;
  std::vector<HttpRequestCount> http_requests;
  ConfigStatus config;
  std::vector<OutputStatus> outputs;         // an agent before ABI 1.1: none
  std::uint64_t http_auth_failures = 0;      // credentials refused (an agent before 1.2: 0)
  std::uint64_t http_auth_rate_limited = 0;  // refused unchecked, the address blocked
  // Since ABI 1.6: alert instances by state now, and the notifiers.
  std::uint64_t alerts_firing = 0;
  std::uint64_t alerts_pending = 0;
  std::vector<NotifierStatus> notifiers;
};

// A history query. Limits are checked by the handler; the store trusts them.
enum class Aggregate : std::uint32_t { mean, max, min, last };

struct HistoryQuery {
  std::size_t limit = 120;            // latest N samples (or buckets) within [since, until]
  std::optional<double> since;        // unix seconds, inclusive
  std::optional<double> until;        // unix seconds, inclusive
  std::vector<std::string> patterns;  // series names or keys, `*` globs; empty means all
  double step = 0;                    // > 0: buckets of `step` seconds, aligned to multiples of it
  Aggregate aggregate = Aggregate::mean;
  // Since ABI 1.7: each series' lowest and highest sample of each bucket as well
  // (HistorySeries::min, max), whatever the aggregate; without a step a point is one sample, its
  // own min and max (/api/history takes `band` only with `step`).
  bool band = false;
};

struct HistorySeries {
  std::string key;  // `name` or `name{label="value",...}`, unique within a result
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;
  std::string unit;
  MetricKind kind = MetricKind::gauge;
  std::vector<double> values;  // one per timestamp; NaN where the series has no value
  // Only for a query with `band` (else empty): one per timestamp, the lowest and highest sample
  // of the bucket; NaN where `values` is.
  std::vector<double> min{};  // (initialised: rows written without them stay warning-free)
  std::vector<double> max{};
};

struct HistoryResult {
  std::vector<double> timestamps;  // unix seconds, oldest first
  std::vector<HistorySeries> series;
};

// Thrown by DataSource::history when the store cannot answer (I/O error, corrupt database).
struct StoreError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace kiwi
