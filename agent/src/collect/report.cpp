#include "collect/report.hpp"

#include <cstdio>

namespace kiwi::agent {

namespace {

constexpr const char* kFirstSample = "first sample in progress";

// A series' identity for the per-sensor limit: FNV-1a over the name and labels (a collision lets
// one series more through, harmless; no allocation per metric per tick).
std::uint64_t series_hash(const MetricValue& m) {
  std::uint64_t h = 1469598103934665603ull;
  auto add = [&](std::string_view s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;  // a separator no UTF-8 text holds
  };
  add(m.name);
  for (auto& [k, v] : m.labels) add(k), add(v);
  return h;
}

// "3.2s", for how long a call took.
std::string seconds_text(std::chrono::nanoseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", std::chrono::duration<double>(d).count());
  return buf;
}

}  // namespace

ReportKeeper::ReportKeeper(std::string name, std::string plugin)
    : name_(std::move(name)), plugin_(std::move(plugin)) {}

void ReportKeeper::read(SampleCall o, double duration_seconds, std::int64_t ts_ms,
                        std::size_t max_series, Logger& log) {
  SensorReport& r = fresh_.emplace();
  r.name = name_;
  r.plugin = plugin_;
  r.timestamp = static_cast<double>(ts_ms) / 1000.0;
  r.state = o.state;
  r.message = std::move(o.message);
  r.duration_seconds = duration_seconds;
  r.metrics = std::move(o.metrics);
  // The series limit: a sensor that makes up new series every sample (a label with a counter in
  // it) would otherwise grow the catalog and the file without end.
  const std::size_t limit = max_series;
  std::uint64_t refused = 0;
  std::erase_if(r.metrics, [&](const MetricValue& m) {
    const std::uint64_t h = series_hash(m);
    if (series_.contains(h)) return false;
    if (series_.size() < limit) return !series_.insert(h).second;
    ++refused;
    return true;
  });
  if (refused && series_refused_total_ == 0)
    log.warn("sensor " + name_ + ": reached its limit of " + std::to_string(limit) +
             " series (collector.max_series_per_sensor); values of further new series are "
             "refused, and counted in kiwi_sensor_series_refused_total");
  r.series_refused_total = series_refused_total_ += refused;
  // A reset at info when it happens; at debug while the same counters keep going back.
  if (!o.rates_log.empty())
    log.log(o.rates_log_repeats ? LogLevel::debug : LogLevel::info,
            "sensor " + name_ + ": " + o.rates_log);
  if (r.state == SensorState::error) {
  } else if (!o.dropped_note.empty()) {
    // Logged when it starts and whenever what is dropped changes, not every sample.
    if (o.dropped_note != last_invalid_note_) log.warn("sensor " + name_ + ": " + o.dropped_note);
    r.message = r.message.empty() ? o.dropped_note : r.message + "; " + o.dropped_note;
    last_invalid_note_ = std::move(o.dropped_note);
  } else {
    last_invalid_note_.clear();
  }
  r.errors_total = errors_total_ += (r.state == SensorState::error);
  r.invalid_metrics_total = invalid_metrics_total_ += o.dropped;
  if (r.state == SensorState::error && last_state_ != SensorState::error)
    log.warn("sensor " + name_ + " failed: " + r.message);
  last_state_ = r.state;
}

// Reported once; the sensor is not called again until its call returns.
void ReportKeeper::time_out(Millis limit, std::int64_t ts_ms, Logger& log) {
  const std::string what = "timed out after " + format_duration(limit);
  SensorReport& r = fresh_.emplace();
  r.name = name_;
  r.plugin = plugin_;
  r.timestamp = static_cast<double>(ts_ms) / 1000.0;
  r.state = SensorState::error;
  r.message = what + "; not called again until its call returns";
  r.duration_seconds = std::chrono::duration<double>(limit).count();
  r.errors_total = ++errors_total_;
  r.invalid_metrics_total = invalid_metrics_total_;
  r.series_refused_total = series_refused_total_;
  log.warn("sensor " + name_ + ": " + what + "; not called again until its call returns");
  last_state_ = SensorState::error;
}

void ReportKeeper::came_back(std::chrono::nanoseconds took, Logger& log) {
  // Its late result is dropped; it is posted again when next due.
  log.info("sensor " + name_ + ": returned after " + seconds_text(took) + "; sampling again");
  last_state_ = SensorState::ok;  // a failure after this is logged again
}

SnapshotAssembly::SnapshotAssembly(std::uint64_t sequence, std::int64_t ts_ms,
                                   const CollectorSettings& settings,
                                   const Snapshot* last_published, std::size_t reports)
    : snap_(std::make_shared<Snapshot>()), last_(last_published) {
  snap_->sequence = sequence;
  snap_->timestamp = static_cast<double>(ts_ms) / 1000.0;
  snap_->interval_seconds = static_cast<double>(settings.interval.count()) / 1000.0;
  snap_->stale_after_seconds = static_cast<double>(settings.stale_after.count()) / 1000.0;
  snap_->host = settings.host;
  snap_->agent_version = settings.agent_version;
  snap_->started_at = settings.started_at;
  snap_->sensors.reserve(reports);
}

// Moved, not copied (a copy cost some 200 allocations a tick): a new report moves in; one without
// is copied from the last snapshot published, from wherever the keeper was in it (the order
// changes on reconfiguration); a sensor never read yet says so.
void SnapshotAssembly::add(ReportKeeper& k, std::vector<const MetricValue*>& fresh) {
  const auto position = static_cast<std::ptrdiff_t>(snap_->sensors.size());
  if (k.fresh_) {
    // Pointers to the metrics stay valid: a report moved by the vector keeps its metrics' buffer.
    for (auto& m : snap_->sensors.emplace_back(std::move(*k.fresh_)).metrics) fresh.push_back(&m);
    k.fresh_.reset();
  } else if (k.published_at_ >= 0 && last_) {
    snap_->sensors.push_back(last_->sensors[static_cast<std::size_t>(k.published_at_)]);
  } else {
    SensorReport& r = snap_->sensors.emplace_back();
    r.name = k.name_;
    r.plugin = k.plugin_;
    r.state = SensorState::no_data;
    r.message = kFirstSample;
    r.timestamp = snap_->timestamp;
    r.errors_total = k.errors_total_;
    r.invalid_metrics_total = k.invalid_metrics_total_;
  }
  k.published_at_ = position;
}

}  // namespace kiwi::agent
