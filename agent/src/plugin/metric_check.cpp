#include "plugin/metric_check.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <kiwi/io.hpp>
#include <kiwi/prometheus.hpp>
#include <kiwi/rates.hpp>

namespace kiwi::agent {

namespace {

// `s` in double quotes for a message: at most 100 bytes, control and non-ASCII bytes as \xNN, so a
// hostile name can neither flood the log nor put a newline or raw bytes into it.
std::string quoted(std::string_view s) {
  return kiwi::quote_excerpt(s, 100, '"');
}

// A histogram's or summary's series: named as its part of the family (kiwi/plugin.h), with a
// bound (le: a number or +Inf) or a quantile (a number in 0..1) that Prometheus can read.
std::optional<std::string> check_family_part(const MetricSpec& metric,
                                             std::span<const Label> labels) {
  if (metric.kind != MetricKind::histogram && metric.kind != MetricKind::summary)
    return std::nullopt;
  const bool histogram = metric.kind == MetricKind::histogram;
  const std::string_view part = prometheus::part_label(histogram);
  const Label* bound = nullptr;
  for (auto& l : labels)
    if (l.name == part) bound = &l;
  if (!prometheus::family_part(metric.name, histogram, bound != nullptr))
    return histogram ? std::string(
                           "a histogram's series is <family>_bucket with a label le, "
                           "<family>_sum or <family>_count")
                     : std::string(
                           "a summary's series is <family> with a label quantile, "
                           "<family>_sum or <family>_count");
  if (!bound) return std::nullopt;
  const std::string_view v = bound->value;
  double x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  const bool number = !v.empty() && ec == std::errc() && end == v.data() + v.size() &&
                      std::isfinite(x) && v[0] != '+';
  if (histogram ? number || v == "+Inf" : number && x >= 0 && x <= 1) return std::nullopt;
  return "label " + std::string(part) + "=" + quoted(v) +
         (histogram ? " is not a bucket bound (a number or +Inf)"
                    : " is not a quantile (a number from 0 to 1)");
}

constexpr std::size_t kProblemsShown = 3;
constexpr std::size_t kMessageMax = 16 * 1024;  // bytes of a sensor's message kept

}  // namespace

std::optional<std::string> check_metric(const MetricSpec& metric, std::span<const Label> labels,
                                        double value) {
  const std::string_view name = metric.name;
  if (!prometheus::is_sensor_metric_name(name))
    return quoted(name) +
           ": not a valid metric name (letters, digits and '_', not starting with a digit)";
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (!prometheus::is_sensor_label_name(labels[i].name))
      return quoted(name) + ": label " + quoted(labels[i].name) +
             " is not a valid label name (letters, digits and '_', not starting with a digit or "
             "\"__\")";
    for (std::size_t j = 0; j < i; ++j)
      if (labels[j].name == labels[i].name)
        return quoted(name) + ": label " + quoted(labels[i].name) + " given twice";
  }
  if (!is_known_unit(metric.unit))
    return quoted(name) + ": unit code " + std::to_string(static_cast<std::uint32_t>(metric.unit)) +
           " is not a known unit (" + units_text() + ")";
  if (!is_known_kind(metric.kind))
    return quoted(name) + ": unknown metric kind " +
           std::to_string(static_cast<std::uint32_t>(metric.kind));
  if (auto problem = check_family_part(metric, labels)) return quoted(name) + ": " + *problem;
  if (!std::isfinite(value)) return quoted(name) + ": value is not a finite number";
  return std::nullopt;
}

void CheckedSink::note(std::string problem) {
  ++dropped_;
  if (problems_.size() < kProblemsShown) problems_.push_back(std::move(problem));
}

void CheckedSink::emit(const MetricSpec& metric, std::span<const Label> labels, double value) {
  if (auto problem = check_metric(metric, labels, value)) return note(std::move(*problem));
  MetricValue& m = out_.emplace_back();
  m.name = metric.name;
  m.labels.reserve(labels.size());
  // Names passed check_metric (ASCII); a value is any text a plugin read (a mount path, a script's
  // output): made valid UTF-8 here, once, for every consumer (JSON, /metrics, the store, remote
  // write), each invalid byte becoming U+FFFD.
  for (auto& l : labels) m.labels.emplace_back(l.name, kiwi::to_valid_utf8(l.value));
  m.value = value;
  m.unit = to_string(metric.unit);
  m.kind = metric.kind;
  if (rates_ && metric.kind == MetricKind::counter && !metric.rate.empty())
    rates_->add(m, metric, out_);
}

void CheckedSink::help(std::string_view family, std::string_view text) {
  constexpr std::size_t kHelpMax = 1024;
  if (!help_ || text.empty() || !prometheus::is_sensor_metric_name(family)) return;
  // A relayed exporter gives its families in order: the newest is the likeliest repeat.
  for (auto it = help_->rbegin(); it != help_->rend(); ++it)
    if (it->first == family) return;
  help_->emplace_back(family, kiwi::truncate_utf8(kiwi::to_valid_utf8(text), kHelpMax));
}

std::string CheckedSink::finish() {
  // Repeats of a series: sorted by (name, labels as a set), so neighbours are equal; the first
  // emitted is kept. Labels already in name order (as every in-tree sensor emits them) are
  // compared in place; only others are copied and sorted.
  if (out_.size() > 1) {
    using LabelList = std::vector<std::pair<std::string, std::string>>;
    std::vector<LabelList> sorted_copies;
    std::vector<const LabelList*> labels(out_.size());
    for (std::size_t i = 0; i < out_.size(); ++i) {
      const LabelList& l = out_[i].labels;
      labels[i] = &l;
      if (!std::is_sorted(l.begin(), l.end())) {
        if (sorted_copies.capacity() < out_.size()) sorted_copies.reserve(out_.size());  // no moves
        LabelList& copy = sorted_copies.emplace_back(l);
        std::sort(copy.begin(), copy.end());
        labels[i] = &copy;
      }
    }
    std::vector<std::size_t> order(out_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      if (int c = out_[a].name.compare(out_[b].name)) return c < 0;
      if (*labels[a] != *labels[b]) return *labels[a] < *labels[b];
      return a < b;
    });
    auto labels_of = [&](std::size_t i) -> const LabelList& { return *labels[i]; };
    std::vector<char> repeat(out_.size(), 0);
    for (std::size_t k = 1; k < order.size(); ++k) {
      std::size_t a = order[k - 1], b = order[k];
      if (out_[a].name == out_[b].name && labels_of(a) == labels_of(b)) {
        repeat[b] = 1;
        std::string series = out_[b].name;
        for (auto& [n, v] : out_[b].labels) series += " " + n + "=" + v;
        note(quoted(series) + ": emitted more than once in one sample (the first value is kept)");
      }
    }
    erase_flagged(out_, repeat);
  }
  if (!dropped_) return {};
  std::string msg = "dropped " + std::to_string(dropped_) +
                    (dropped_ == 1 ? " invalid metric: " : " invalid metrics: ");
  for (std::size_t i = 0; i < problems_.size(); ++i) msg += (i ? "; " : "") + problems_[i];
  if (dropped_ > problems_.size()) msg += "; ...";
  return msg;
}

SampleCall call_sensor(Sensor& sensor, RateDeriver& rates, std::string_view procfs) {
  KeptFile uptime(join_path(procfs, "uptime"));
  return call_sensor(sensor, rates, uptime);
}

SampleCall call_sensor(Sensor& sensor, RateDeriver& rates, KeptFile& uptime,
                       std::chrono::steady_clock::time_point deadline) {
  if (!rates.wants_clock()) {
    rates.begin(std::nullopt);
  } else {
    try {
      rates.begin(read_uptime_ms(uptime));
    } catch (const std::exception& e) {
      rates.begin(std::nullopt, e.what());
    }
  }
  return call_checked([&](MetricSink& sink) { return sensor.sample(sink); }, &rates, deadline);
}

SampleCall call_checked(const std::function<SampleResult(MetricSink&)>& sample, RateDeriver* rates,
                        std::chrono::steady_clock::time_point deadline) {
  SampleCall out;
  CheckedSink sink(out.metrics, deadline, rates, &out.help);
  try {
    SampleResult result = sample(sink);
    out.state = result.status == SampleStatus::ok ? SensorState::ok : SensorState::no_data;
    out.message = std::move(result.message);
  } catch (const std::exception& e) {
    out.state = SensorState::error;
    out.message = e.what();
  } catch (...) {
    out.state = SensorState::error;
    out.message = "unknown exception";
  }
  const bool read = out.state != SensorState::error;
  RateDeriver::Notes notes;
  if (rates) notes = rates->finish(read, out.metrics);
  if (read) {
    out.dropped_note = sink.finish();
    if (!notes.status.empty())
      out.message = out.message.empty() ? notes.status : out.message + "; " + notes.status;
  } else {
    out.metrics.clear();
    out.help.clear();
  }
  // The message reaches the JSON API, the snapshot file and the log: valid UTF-8, and bounded
  // (a sensor that quotes a whole file cannot put it into every tick's snapshot).
  out.message = kiwi::truncate_utf8(kiwi::to_valid_utf8(out.message), kMessageMax);
  out.dropped = sink.dropped();
  out.rates_log = std::move(notes.log);
  out.rates_log_repeats = notes.log_repeats;
  return out;
}

}  // namespace kiwi::agent
