#include "alert/engine.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <kiwi/glob.hpp>
#include <limits>
#include <unordered_map>
#include <variant>

#include "config/alert_rule.hpp"
#include "store/catalog.hpp"

namespace kiwi::agent {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

constexpr MetricSpec kAlertFiring{
    "alert_firing", Unit::none, MetricKind::gauge, "alertname,severity",
    "1 for each firing alert instance ([[alert]] rules; the series' labels beside alertname and "
    "severity; /api/alerts has the details)"};
constexpr MetricSpec kRows[] = {kAlertFiring};

// `name{a="b",c="d"}`: the history's key of the series (its label text escaped as the store's).
std::string series_key(const MetricValue& m) {
  if (m.labels.empty()) return m.name;
  std::string out = m.name + '{';
  append_canonical_labels(out, m.labels);
  return out + '}';
}

int state_order(AlertState s) {
  return s == AlertState::firing ? 0 : s == AlertState::pending ? 1 : 2;
}

std::int64_t millis(double unix_seconds) {
  return std::llround(unix_seconds * 1000);
}

}  // namespace

struct AlertEngine::Instance {
  Alert alert;
  std::string message;  // the sensor's (status rules)
  bool holds = false, clears = false, known = false;
  double last_raw = kNaN;  // rate: the counter's previous value and its reading's time
  double last_raw_at = 0;
  std::int64_t clear_since_ms = INT64_MIN;
  std::uint64_t seen_tick = 0;
};

struct AlertEngine::Rule {
  AlertRule spec;
  Severity severity = Severity::warning;
  std::vector<TemplatePiece> summary;  // parsed once (the default one when the rule has none)
  bool exact = false;                  // metric has no `*`: compared, not matched
  std::map<std::string, Instance> instances;  // by sensor + '\x1f' + series
  // The series of the tick whose report and name the rule matches: (report, metric) indexes and
  // the instance key, found when the tick's layout changes (layout_); `stale` until found once.
  struct Candidate {
    std::uint32_t report, metric;
    std::string key;  // the sensor, '\x1f', the series' key (its labels as the layout was found)
  };
  std::vector<Candidate> candidates;
  bool stale = true;
};

AlertEngine::AlertEngine(Store& store, Logger& log) : store_(store), log_(log) {
  for (Alert& a : store_.alert_states()) restored_[a.name].push_back(std::move(a));
}

AlertEngine::~AlertEngine() = default;

std::span<const MetricSpec> AlertEngine::metrics() const {
  return kRows;
}

void AlertEngine::configure(const std::vector<AlertRule>& rules,
                            const std::vector<std::string>& disabled) {
  std::lock_guard lock(mutex_);
  std::vector<std::unique_ptr<Rule>> next;
  for (const AlertRule& spec : rules) {
    if (std::find(disabled.begin(), disabled.end(), spec.name) != disabled.end()) continue;
    auto rule = std::make_unique<Rule>();
    rule->spec = spec;
    rule->severity = severity_named(spec.severity);
    auto parsed = parse_template(spec.summary.empty() ? default_summary(spec) : spec.summary);
    if (auto* pieces = std::get_if<std::vector<TemplatePiece>>(&parsed))
      rule->summary = std::move(*pieces);  // else the configuration refused it already
    rule->exact = spec.metric.find('*') == std::string::npos;
    // The running rule of that name keeps its instances; else what the store kept of it.
    for (auto& old : rules_)
      if (old && old->spec.name == spec.name) rule->instances = std::move(old->instances);
    if (auto it = restored_.find(spec.name); it != restored_.end()) {
      for (Alert& a : it->second) {
        Instance in;
        in.alert = std::move(a);
        in.alert.severity = rule->severity;
        rule->instances.emplace(in.alert.sensor + '\x1f' + in.alert.series, std::move(in));
      }
      restored_.erase(it);
    }
    next.push_back(std::move(rule));
  }
  // Rules gone: a firing instance resolves for the notifiers.
  const double now = static_cast<double>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count()) /
                     1000.0;
  for (auto& old : rules_) {
    if (!old) continue;
    for (auto& [key, in] : old->instances)
      if (in.alert.state == AlertState::firing) {
        AlertNotice n{
            in.alert.name,    in.alert.labels, in.alert.sensor,    in.alert.severity,  false,
            in.alert.summary, in.alert.value,  in.alert.threshold, in.alert.active_at, now};
        store_.log_alert_event(std::move(n));
      }
    changed_ = true;
  }
  rules_ = std::move(next);
  changed_ = true;
}

std::string AlertEngine::format_value(double v) {
  if (std::isnan(v)) return "n/a";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[48];
  const double a = std::fabs(v);
  if (a >= 100)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else if (a >= 10)
    std::snprintf(buf, sizeof buf, "%.1f", v);
  else
    std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string AlertEngine::render(std::string_view summary_template, const Alert& a,
                                std::string_view message) {
  auto parsed = parse_template(summary_template);
  auto* pieces = std::get_if<std::vector<TemplatePiece>>(&parsed);
  if (!pieces) return std::string(summary_template);  // checked when the config was read
  return render(*pieces, a, message);
}

std::string AlertEngine::render(std::span<const TemplatePiece> pieces, const Alert& a,
                                std::string_view message) {
  std::string out;
  for (const TemplatePiece& p : pieces) {
    if (!p.placeholder) {
      out += p.text;
    } else if (p.text == "value") {
      out += format_value(a.value);
    } else if (p.text == "value_percent") {
      out += format_value(a.value * 100);
    } else if (p.text == "threshold") {
      out += format_value(a.threshold);
    } else if (p.text == "threshold_percent") {
      out += format_value(a.threshold * 100);
    } else if (p.text == "name") {
      out += a.name;
    } else if (p.text == "series") {
      out += a.series;
    } else if (p.text == "sensor") {
      out += a.sensor;
    } else if (p.text == "severity") {
      out += to_string(a.severity);
    } else if (p.text == "message") {
      out += message;
    } else {  // labels.<label>
      const std::string_view label = std::string_view(p.text).substr(7);
      for (auto& [k, v] : a.labels)
        if (k == label) out += v;
    }
  }
  return out;
}

SampleResult AlertEngine::sample(const Snapshot& tick, MetricSink& sink) {
  std::lock_guard lock(mutex_);
  const std::int64_t now_ms = millis(tick.timestamp);
  // The tick's layout: each report's name and its series' names and labels, hashed. Sensors emit
  // the same series in the same order tick after tick, so a rule finds its series by name once, and
  // again only when the layout changes (a sensor added, a series new or gone): comparing every
  // rule's name with every series' was most of a tick's cost at 50 rules (docs/benchmarks.md).
  if (rules_.empty()) {  // every rule disabled: nothing to look at
    if (changed_) store_.set_alert_states(list());
    changed_ = false;
    return SampleResult::ok();
  }
  std::vector<std::uint64_t> layout;
  layout.reserve(tick.sensors.size());
  for (const SensorReport& r : tick.sensors) {
    std::uint64_t h = std::hash<std::string_view>{}(r.name);
    for (const MetricValue& m : r.metrics) {
      h = h * 1'000'003 ^ std::hash<std::string_view>{}(m.name);
      for (auto& [k, v] : m.labels)
        h = (h * 1'000'003 ^ std::hash<std::string_view>{}(k)) * 31 ^
            std::hash<std::string_view>{}(v);
    }
    layout.push_back(h);
  }
  const bool relayout = layout != layout_;
  layout_ = std::move(layout);
  for (auto& rule : rules_) {
    if (relayout || rule->stale) find_candidates(*rule, tick);
    evaluate(*rule, tick, now_ms);
  }
  std::vector<Label> labels;
  std::vector<std::string> names;  // exported_<label> for a series label named like ours
  for (auto& rule : rules_)
    for (auto& [key, in] : rule->instances) {
      if (in.alert.state != AlertState::firing) continue;
      names.clear();
      for (auto& [k, v] : in.alert.labels)
        names.push_back(k == "alertname" || k == "severity" ? "exported_" + k : k);
      labels.clear();
      labels.push_back({"alertname", in.alert.name});
      labels.push_back({"severity", to_string(in.alert.severity)});
      for (std::size_t i = 0; i < names.size(); ++i)
        labels.push_back({names[i], in.alert.labels[i].second});
      sink.emit(kAlertFiring, labels, 1.0);
    }
  if (changed_) store_.set_alert_states(list());  // the store's copy: on a change only
  changed_ = false;
  return SampleResult::ok();
}

void AlertEngine::find_candidates(Rule& rule, const Snapshot& tick) {
  const AlertRule& spec = rule.spec;
  rule.candidates.clear();
  rule.stale = false;
  if (!spec.status.empty()) return;
  for (std::uint32_t r = 0; r < tick.sensors.size(); ++r) {
    const SensorReport& report = tick.sensors[r];
    if (!spec.sensor.empty() && !glob_match(spec.sensor, report.name)) continue;
    for (std::uint32_t i = 0; i < report.metrics.size(); ++i) {
      const std::string& name = report.metrics[i].name;
      if (rule.exact ? name == spec.metric : glob_match(spec.metric, name))
        rule.candidates.push_back({r, i, report.name + '\x1f' + series_key(report.metrics[i])});
    }
  }
}

void AlertEngine::evaluate(Rule& rule, const Snapshot& tick, std::int64_t now_ms) {
  const AlertRule& spec = rule.spec;
  const std::uint64_t seq = tick.sequence;
  for (const SensorReport& report : tick.sensors) {
    if (!spec.sensor.empty() && !glob_match(spec.sensor, report.name)) continue;
    if (!spec.status.empty()) {
      const bool flag = spec.status == "failing" ? report.state == SensorState::error
                        : spec.status == "no_data"
                            ? report.state == SensorState::no_data
                            : tick.timestamp - report.timestamp > tick.stale_after_seconds;
      // A sensor without the status and without an instance: none is made (see below).
      if (!flag && rule.instances.empty()) continue;
      std::string key = report.name + '\x1f' + report.name;
      if (!flag && !rule.instances.contains(key)) continue;
      Instance& in = rule.instances[std::move(key)];
      if (in.alert.name.empty()) {
        in.alert.name = spec.name;
        in.alert.sensor = in.alert.series = report.name;
        in.alert.labels = {{"sensor", report.name}};  // one series per sensor in /metrics
        in.alert.severity = rule.severity;
      }
      in.holds = flag;
      in.clears = !flag;
      in.known = true;
      in.message = report.message;
      in.alert.value = in.alert.threshold = kNaN;
      in.seen_tick = seq;
      step(rule, in, true, now_ms);
      continue;
    }
  }
  for (const Rule::Candidate& c : rule.candidates) {
    const SensorReport& report = tick.sensors[c.report];
    const MetricValue& m = report.metrics[c.metric];
    {
      bool match = true;
      for (auto& matcher : spec.labels) {  // not a structured binding: clang 14 (the fuzz
                                           // build) refuses one captured by a lambda
        auto it = std::find_if(m.labels.begin(), m.labels.end(),
                               [&](auto& l) { return l.first == matcher.first; });
        match &= it != m.labels.end() && glob_match(matcher.second, it->second);
      }
      if (!match) continue;
      double threshold = spec.above ? *spec.above : *spec.below;
      if (!spec.threshold_series.empty())
        for (const MetricValue& t : report.metrics)
          if (t.name == spec.threshold_series && t.labels == m.labels) {
            threshold = t.value + spec.threshold_offset;
            break;
          }
      // A series that does not hold and has no instance would get an inactive one, erased below
      // in this same call: none is made (most series of most rules, every tick; the keys and the
      // instance were most of a tick's cost, tools/bench/micro.cpp "alerts"). A rate keeps its
      // instance for the counter's last reading.
      const bool holds_now = !std::isnan(m.value) && !std::isnan(threshold) &&
                             (spec.above ? m.value > threshold : m.value < threshold);
      if (!spec.rate && !holds_now && rule.instances.empty()) continue;
      const std::string& key = c.key;  // the layout (labels included) is the one it was made on
      auto found = rule.instances.find(key);
      if (!spec.rate && !holds_now && found == rule.instances.end()) continue;
      Instance& in = found != rule.instances.end() ? found->second : rule.instances[key];
      if (in.alert.name.empty() || in.alert.labels.empty() != m.labels.empty()) {
        in.alert.name = spec.name;
        in.alert.sensor = report.name;
        in.alert.series = key.substr(report.name.size() + 1);
        in.alert.labels = m.labels;
        std::sort(in.alert.labels.begin(), in.alert.labels.end());
        in.alert.severity = rule.severity;
      }
      in.seen_tick = seq;
      double value = m.value;
      if (spec.rate) {
        if (report.timestamp > in.last_raw_at) {  // a new reading of the counter
          const double dt = report.timestamp - in.last_raw_at;
          const double rate = std::isnan(in.last_raw) || m.value < in.last_raw || dt <= 0
                                  ? kNaN
                                  : (m.value - in.last_raw) / dt;
          in.last_raw = m.value;
          in.last_raw_at = report.timestamp;
          in.alert.value = rate;
        }
        value = in.alert.value;
      }
      in.alert.value = value;
      in.alert.threshold = threshold;
      in.known = !std::isnan(value) && !std::isnan(threshold);
      if (in.known) {
        const double h =
            std::isinf(threshold) ? 0 : spec.hysteresis.value_or(0.05 * std::fabs(threshold));
        in.holds = spec.above ? value > threshold : value < threshold;
        in.clears = spec.above ? value <= threshold - h : value >= threshold + h;
      }
      step(rule, in, true, now_ms);
    }
  }
  // Instances whose series (or sensor) is gone this tick.
  for (auto it = rule.instances.begin(); it != rule.instances.end();) {
    Instance& in = it->second;
    if (in.seen_tick != seq) step(rule, in, false, now_ms);
    const bool expired = in.alert.state == AlertState::resolved &&
                         now_ms - millis(in.alert.since) >= kResolvedShownForMs;
    if (in.alert.state == AlertState::inactive || expired) {
      if (expired) changed_ = true;
      // Kept while a rate needs its last reading.
      if (spec.rate && in.seen_tick == seq && !expired) {
        ++it;
        continue;
      }
      it = rule.instances.erase(it);
    } else {
      ++it;
    }
  }
}

void AlertEngine::step(Rule& rule, Instance& in, bool seen, std::int64_t now_ms) {
  const AlertState s = in.alert.state;
  if (!seen) {
    if (s == AlertState::pending) transition(rule, in, AlertState::inactive, now_ms);
    if (s == AlertState::firing) {
      in.alert.value = kNaN;
      transition(rule, in, AlertState::resolved, now_ms);
    }
    return;
  }
  if (!in.known) return;
  switch (s) {
    case AlertState::inactive:
    case AlertState::resolved:
      if (!in.holds) break;
      in.alert.active_at = static_cast<double>(now_ms) / 1000.0;
      transition(rule, in,
                 rule.spec.hold_for.count() == 0 ? AlertState::firing : AlertState::pending,
                 now_ms);
      break;
    case AlertState::pending:
      if (!in.holds)
        transition(rule, in, AlertState::inactive, now_ms);
      else if (now_ms - millis(in.alert.active_at) >= rule.spec.hold_for.count())
        transition(rule, in, AlertState::firing, now_ms);
      break;
    case AlertState::firing:
      if (!in.clears) {
        in.clear_since_ms = INT64_MIN;
        break;
      }
      if (in.clear_since_ms == INT64_MIN) in.clear_since_ms = now_ms;
      if (now_ms - in.clear_since_ms >= rule.spec.keep_firing_for.count())
        transition(rule, in, AlertState::resolved, now_ms);
      break;
  }
}

void AlertEngine::transition(Rule& rule, Instance& in, AlertState to, std::int64_t now_ms) {
  const double now = static_cast<double>(now_ms) / 1000.0;
  in.alert.state = to;
  in.alert.since = now;
  in.clear_since_ms = INT64_MIN;
  changed_ = true;
  if (to == AlertState::inactive) in.alert.active_at = 0;
  if (to != AlertState::firing && to != AlertState::resolved) return;
  in.alert.summary = render(rule.summary, in.alert, in.message);
  const bool firing = to == AlertState::firing;
  log_.log(firing ? LogLevel::warn : LogLevel::info,
           std::string("alert ") + (firing ? "firing: " : "resolved: ") + in.alert.name + " (" +
               in.alert.series + "): " + in.alert.summary);
  store_.log_alert_event({in.alert.name, in.alert.labels, in.alert.sensor, in.alert.severity,
                          firing, in.alert.summary, in.alert.value, in.alert.threshold,
                          in.alert.active_at, firing ? 0.0 : now});
}

// Under mutex_. Summaries are rendered here, for whoever asks, not at every tick.
std::vector<Alert> AlertEngine::list() const {
  std::vector<Alert> out;
  for (auto& rule : rules_)
    for (auto& [key, in] : rule->instances)
      if (in.alert.state != AlertState::inactive) {
        out.push_back(in.alert);
        out.back().summary = render(rule->summary, in.alert, in.message);
      }
  std::sort(out.begin(), out.end(), [](const Alert& a, const Alert& b) {
    const int x = state_order(a.state), y = state_order(b.state);
    return std::tie(x, a.name, a.labels, a.sensor) < std::tie(y, b.name, b.labels, b.sensor);
  });
  return out;
}

std::vector<Alert> AlertEngine::alerts() const {
  std::lock_guard lock(mutex_);
  return list();
}

}  // namespace kiwi::agent
