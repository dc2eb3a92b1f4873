#include "collect/report.hpp"

#include <cmath>
#include <cstdio>

#include "store/catalog.hpp"

namespace kiwi::agent {

namespace {

constexpr const char* kFirstSample = "first sample in progress";

// Adds `labels` to `m`'s: one of `m`'s own with such a name is kept as "exported_<name>".
void add_labels(MetricValue& m, const ReportKeeper::Labels& labels) {
  for (auto& [name, value] : labels) {
    for (auto& own : m.labels)
      if (own.first == name) own.first.insert(0, "exported_");
    m.labels.emplace_back(name, value);
  }
}

// The series as /api/history names it: `name` or `name{k="v",...}` (store/catalog.hpp).
std::string series_text(const MetricValue& m) {
  std::string out = m.name;
  if (m.labels.empty()) return out;
  out += '{';
  append_canonical_labels(out, m.labels);
  return out + '}';
}

// The first value of a reading the registry refused, for each reason: the note the report's
// message and the log carry (no counts in it, so that it stays the same while the cause does).
class Refused {
 public:
  void add(const SeriesRegistry::Verdict& v, const MetricValue& m, const SeriesRegistry& series) {
    ++count_;
    std::string& first = first_[static_cast<std::size_t>(v.refusal)];
    if (!first.empty()) return;
    switch (v.refusal) {
      case SeriesRegistry::Refusal::owned:
        first = series_text(m) + " is " +
                (series.name_of(v.other) == kAgentReport ? "the agent"
                                                         : "sensor " + series.name_of(v.other)) +
                "'s series: its values from this sensor are refused (labels = { ... } on one of "
                "the two tells them apart)";
        break;
      case SeriesRegistry::Refusal::reserved:
        first = m.name + " is one of the agent's own metrics: refused";
        break;
      case SeriesRegistry::Refusal::kind:
        first = series_text(m) + " is refused: its family is a " + std::string(to_string(v.kind)) +
                " already";
        break;
      case SeriesRegistry::Refusal::limit:
        first = "reached its limit of " + std::to_string(series.limit()) +
                " series (collector.max_series_per_sensor): values of new series are refused";
        break;
      case SeriesRegistry::Refusal::none:
        break;
    }
  }
  std::uint64_t count() const { return count_; }
  std::string note() const {
    std::string out;
    for (auto& s : first_)
      if (!s.empty()) out += (out.empty() ? "" : "; ") + s;
    return out;
  }

 private:
  std::uint64_t count_ = 0;
  std::string first_[5];  // by Refusal
};

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
                        SeriesRegistry& series, Logger& log) {
  SensorReport& r = fresh_.emplace();
  r.name = name_;
  r.plugin = plugin_;
  r.timestamp = static_cast<double>(ts_ms) / 1000.0;
  r.state = o.state;
  r.message = std::move(o.message);
  // Whole microseconds: a float of ~7 random digits every tick cost a third of a stored tick's
  // bytes; as a decimal of 6 places the history stores it as a small integer (sample_codec).
  r.duration_seconds = std::round(duration_seconds * 1e6) / 1e6;
  r.metrics = std::move(o.metrics);
  r.help = std::move(o.help);
  if (!labels_.empty())
    for (auto& m : r.metrics) add_labels(m, labels_);
  // Each series has one writer (series_registry.hpp), and a sensor that makes up new series every
  // sample (a label with a counter in it) reaches its limit instead of growing the catalog and
  // the file without end.
  const SeriesRegistry::Owner owner = series.owner(name_);
  Refused refused;
  std::erase_if(r.metrics, [&](const MetricValue& m) {
    const SeriesRegistry::Verdict v = series.claim(owner, m);
    if (v.stored()) return false;
    refused.add(v, m, series);
    return true;
  });
  std::string note = refused.note();
  r.series_refused_total = series_refused_total_ += refused.count();
  // A reset at info when it happens; at debug while the same counters keep going back.
  if (!o.rates_log.empty())
    log.log(o.rates_log_repeats ? LogLevel::debug : LogLevel::info,
            "sensor " + name_ + ": " + o.rates_log);
  if (!o.dropped_note.empty()) note += (note.empty() ? "" : "; ") + o.dropped_note;
  if (r.state == SensorState::error) {
  } else if (!note.empty()) {
    // Logged when it starts and whenever it changes, not every sample.
    if (note != last_note_) log.warn("sensor " + name_ + ": " + note);
    r.message = r.message.empty() ? note : r.message + "; " + note;
    last_note_ = std::move(note);
  } else {
    last_note_.clear();
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
