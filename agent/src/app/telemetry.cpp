#include "app/telemetry.hpp"

#include <cmath>
#include <kiwi/io.hpp>
#include <string>

namespace kiwi::agent {

namespace {

using enum MetricKind;
constexpr Unit kNone = Unit::none, kSeconds = Unit::seconds, kCount = Unit::count,
               kBytes = Unit::bytes;

// The rows, in the order /metrics shows their families. The names are API (kiwi_ + name in
// /metrics, the name in /api/current and the history).
constexpr MetricSpec kBuildInfo{"build_info", kNone, gauge, "version,abi",
                                "kiwi-agent version and plugin ABI; always 1"};
constexpr MetricSpec kStartTime{"start_time_seconds", kSeconds, gauge, "",
                                "unix time the agent started"};
constexpr MetricSpec kLastSample{"last_sample_timestamp_seconds", kSeconds, gauge, "",
                                 "unix time of the latest sample"};
constexpr MetricSpec kSensorDuration{"sensor_sample_duration_seconds", kSeconds, gauge, "sensor",
                                     "time the sensor's latest sample took"};
constexpr MetricSpec kSensorSuccess{
    "sensor_success", kNone, gauge, "sensor",
    "1 if the sensor's latest sample succeeded (ok or no data), 0 if it failed"};
constexpr MetricSpec kSensorErrors{"sensor_errors_total", kCount, counter, "sensor",
                                   "samples of the sensor that failed"};
constexpr MetricSpec kSensorInvalid{
    "sensor_invalid_metrics_total", kCount, counter, "sensor",
    "metrics the sensor emitted that the agent dropped (bad name, label, unit or value, or a "
    "series repeated in one sample; see /api/current)"};
constexpr MetricSpec kSensorRefused{
    "sensor_series_refused_total", kCount, counter, "sensor",
    "values of the sensor the agent refused: another sensor's series or the agent's own, or new "
    "series past collector.max_series_per_sensor (the sensor's message says which)"};
constexpr MetricSpec kTicks{"collector_ticks_total", kCount, counter, "", "samples taken"};
constexpr MetricSpec kMissedTicks{"collector_missed_ticks_total", kCount, counter, "",
                                  "intervals skipped because a sample overran its interval"};
constexpr MetricSpec kStoreErrors{
    "store_write_errors_total", kCount, counter, "",
    "history commits that failed (each retries every sample still queued)"};
constexpr MetricSpec kStorePending{
    "store_samples_pending", kCount, gauge, "",
    "samples queued in memory and not yet committed to the history file"};
constexpr MetricSpec kStoreRecovered{
    "store_recovered", kNone, gauge, "",
    "1 if a damaged history file was moved aside and replaced since start (/api/health says "
    "where it went)"};
constexpr MetricSpec kDiskWritten{
    "agent_disk_written_bytes_total", kBytes, counter, "",
    "bytes the agent caused to be written to block devices (write_bytes of /proc/self/io; absent "
    "where the kernel does not count them)"};
constexpr MetricSpec kSnapshotFileErrors{
    "snapshot_file_write_errors_total", kCount, counter, "",
    "writes of the snapshot file (collector.snapshot_path) that failed"};
constexpr MetricSpec kConfigGeneration{
    "config_generation", kNone, gauge, "",
    "configuration generation: 1 at start, +1 for every reload that applied"};
constexpr MetricSpec kReloadSuccessful{
    "config_last_reload_successful", kNone, gauge, "",
    "0 if the latest reload (SIGHUP) failed and the previous configuration serves on, else 1"};
constexpr MetricSpec kReloadTime{"config_last_reload_success_timestamp_seconds", kSeconds, gauge,
                                 "", "unix time the running configuration took effect"};
constexpr MetricSpec kReloads{"config_reloads_total", kCount, counter, "result",
                              "reloads (SIGHUP), by result"};
constexpr MetricSpec kHttpRequests{"http_requests_total", kCount, counter, "route,status",
                                   "HTTP requests answered, by route and status"};
constexpr MetricSpec kRwBehind{"remote_write_behind_seconds", kSeconds, gauge, "remote_write",
                               "newest stored sample minus the newest one the receiver took"};
constexpr MetricSpec kRwPending{"remote_write_pending_samples", kCount, gauge, "remote_write",
                                "stored samples not yet sent (estimated from the latest batch)"};
constexpr MetricSpec kRwSent{"remote_write_samples_sent_total", kCount, counter, "remote_write",
                             "samples the receiver acknowledged"};
constexpr MetricSpec kRwDropped{"remote_write_batches_dropped_total", kCount, counter,
                                "remote_write",
                                "batches the receiver refused for good (4xx other than 429)"};
constexpr MetricSpec kRwFailures{
    "remote_write_failures_total", kCount, counter, "remote_write",
    "sends that failed and are retried (connection, timeout, 5xx, 429)"};
constexpr MetricSpec kRwLastError{"remote_write_last_error_info", kNone, gauge,
                                  "remote_write,error",
                                  "the latest failure or refusal (1; absent when none)"};
constexpr MetricSpec kNotifierQueue{
    "notifier_queue_length", kCount, gauge, "notifier",
    "alert transitions waiting to be sent by the notifier (its queue, kept in the database)"};
constexpr MetricSpec kNotifierSent{"notifier_notifications_sent_total", kCount, counter, "notifier",
                                   "notifications the notifier's receiver took"};
constexpr MetricSpec kNotifierFailures{"notifier_failures_total", kCount, counter, "notifier",
                                       "sends that failed and are retried after a backoff"};
constexpr MetricSpec kNotifierDropped{
    "notifier_notifications_dropped_total", kCount, counter, "notifier",
    "notifications the receiver refused for good (a 4xx), skipped"};
constexpr MetricSpec kNotifierLastSent{
    "notifier_last_sent_timestamp_seconds", kSeconds, gauge, "notifier",
    "unix time the receiver last took a notification (absent before the first)"};
constexpr MetricSpec kNotifierLastError{"notifier_last_error_info", kNone, gauge, "notifier,error",
                                        "the latest failure or refusal (1; absent when none)"};
constexpr MetricSpec kAuthFailures{
    "http_auth_failures_total", kCount, counter, "reason",
    "requests refused by [http.auth]: credentials wrong (invalid_credentials), or not checked "
    "because the address failed too often (rate_limited)"};

constexpr MetricSpec kRows[] = {kBuildInfo,
                                kStartTime,
                                kLastSample,
                                kSensorDuration,
                                kSensorSuccess,
                                kSensorErrors,
                                kSensorInvalid,
                                kSensorRefused,
                                kTicks,
                                kMissedTicks,
                                kStoreErrors,
                                kStorePending,
                                kStoreRecovered,
                                kDiskWritten,
                                kSnapshotFileErrors,
                                kConfigGeneration,
                                kReloadSuccessful,
                                kReloadTime,
                                kReloads,
                                kHttpRequests,
                                kRwBehind,
                                kRwPending,
                                kRwSent,
                                kRwDropped,
                                kRwFailures,
                                kRwLastError,
                                kNotifierQueue,
                                kNotifierSent,
                                kNotifierFailures,
                                kNotifierDropped,
                                kNotifierLastSent,
                                kNotifierLastError,
                                kAuthFailures};

// build_info's abi label: the C ABI this agent speaks, "1.3".
const std::string kAbi = std::to_string(KIWI_ABI_MAJOR) + "." + std::to_string(KIWI_ABI_MINOR);

double num(std::uint64_t v) {
  return static_cast<double>(v);
}

}  // namespace

std::optional<std::uint64_t> parse_io_write_bytes(std::string_view io_text) {
  for (std::string_view line : kiwi::Lines(io_text)) {
    kiwi::Fields fields(line);
    if (fields.next() == "write_bytes:") return kiwi::to_number<std::uint64_t>(fields.next());
  }
  return std::nullopt;
}

Telemetry::Telemetry(const AgentData& data, const std::string& procfs)
    : data_(data), self_io_(kiwi::join_path(procfs, "self/io")) {}

std::span<const MetricSpec> Telemetry::rows() {
  return kRows;
}

SampleResult Telemetry::sample(const Snapshot& tick, MetricSink& sink) {
  const AgentStats s = data_.counters();
  sink.emit(kBuildInfo, {s.version, kAbi}, 1);
  sink.emit(kStartTime, std::floor(s.started_at));
  sink.emit(kLastSample, tick.timestamp);
  for (auto& r : tick.sensors) {  // the sensors' reports of this tick
    sink.emit(kSensorDuration, {r.name}, r.duration_seconds);
    sink.emit(kSensorSuccess, {r.name}, r.state == SensorState::error ? 0 : 1);
    sink.emit(kSensorErrors, {r.name}, num(r.errors_total));
    sink.emit(kSensorInvalid, {r.name}, num(r.invalid_metrics_total));
    sink.emit(kSensorRefused, {r.name}, num(r.series_refused_total));
  }
  sink.emit(kTicks, num(s.ticks));
  sink.emit(kMissedTicks, num(s.missed_ticks));
  sink.emit(kStoreErrors, num(s.store_write_errors));
  sink.emit(kStorePending, num(s.store_samples_pending));
  sink.emit(kStoreRecovered, s.store_recovered.empty() ? 0 : 1);
  if (auto io = self_io_.read_if_readable())
    if (auto written = parse_io_write_bytes(*io)) sink.emit(kDiskWritten, num(*written));
  sink.emit(kSnapshotFileErrors, num(s.snapshot_file_errors));
  sink.emit(kConfigGeneration, num(s.config.generation));
  sink.emit(kReloadSuccessful, s.config.reload_status == "failed" ? 0 : 1);
  sink.emit(kReloadTime, std::floor(s.config.loaded_at));
  sink.emit(kReloads, {"ok"}, num(s.config.reloads_ok));
  sink.emit(kReloads, {"failed"}, num(s.config.reloads_failed));
  for (auto& r : s.http_requests)
    sink.emit(kHttpRequests, {r.route, r.status ? std::to_string(r.status) : "other"},
              num(r.count));
  for (auto& o : s.outputs) {
    sink.emit(kRwBehind, {o.name}, o.seconds_behind);
    sink.emit(kRwPending, {o.name}, num(o.samples_pending));
    sink.emit(kRwSent, {o.name}, num(o.samples_sent_total));
    sink.emit(kRwDropped, {o.name}, num(o.batches_dropped_total));
    sink.emit(kRwFailures, {o.name}, num(o.failures_total));
    if (!o.last_error.empty())
      sink.emit(kRwLastError, {o.name, kiwi::to_valid_utf8(o.last_error.substr(0, 200))}, 1);
  }
  for (auto& n : s.notifiers) {
    sink.emit(kNotifierQueue, {n.name}, num(n.queued));
    sink.emit(kNotifierSent, {n.name}, num(n.sent_total));
    sink.emit(kNotifierFailures, {n.name}, num(n.failures_total));
    sink.emit(kNotifierDropped, {n.name}, num(n.dropped_total));
    if (n.last_sent_at > 0) sink.emit(kNotifierLastSent, {n.name}, std::floor(n.last_sent_at));
    if (!n.last_error.empty())
      sink.emit(kNotifierLastError, {n.name, kiwi::to_valid_utf8(n.last_error.substr(0, 200))}, 1);
  }
  sink.emit(kAuthFailures, {"invalid_credentials"}, num(s.http_auth_failures));
  sink.emit(kAuthFailures, {"rate_limited"}, num(s.http_auth_rate_limited));
  return SampleResult::ok();
}

}  // namespace kiwi::agent
