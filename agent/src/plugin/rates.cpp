#include "plugin/rates.hpp"

#include <algorithm>
#include <cmath>
#include <kiwi/rates.hpp>

namespace kiwi::agent {

namespace {

// How a series is named in a note: its labels ("interface=eth0"), or its name if it has none.
std::string series_text(const MetricValue& m) {
  if (m.labels.empty()) return m.name;
  std::string out;
  for (const auto& [name, value] : m.labels) out += (out.empty() ? "" : ",") + name + "=" + value;
  return out;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

}  // namespace

void erase_flagged(std::vector<MetricValue>& metrics, const std::vector<char>& flagged) {
  std::size_t w = 0;
  for (std::size_t i = 0; i < metrics.size(); ++i)
    if (i >= flagged.size() || !flagged[i]) {
      if (w != i) metrics[w] = std::move(metrics[i]);
      ++w;
    }
  metrics.resize(w);
}

void RateDeriver::begin(std::optional<std::int64_t> now_ms, std::string no_clock_reason) {
  ++sample_;
  now_ms_ = now_ms;
  no_clock_reason_ = std::move(no_clock_reason);
  any_counter_ = first_ = had_baseline_ = stalled_ = false;
  backwards_.clear();
  derived_.clear();
}

void RateDeriver::add(const MetricValue& counter, const MetricSpec& row,
                      std::vector<MetricValue>& out) {
  any_counter_ = true;
  if (!now_ms_) return;
  key_ = counter.name;
  for (const auto& [name, value] : counter.labels) {
    key_ += '\0';
    key_ += name;
    key_ += '\0';
    key_ += value;
  }
  auto [it, added] = last_.try_emplace(key_);
  Reading& previous = it->second;
  const Reading now{counter.value, *now_ms_, sample_};
  if (added) {
    first_ = true;
    previous = now;
    return;
  }
  had_baseline_ = true;
  const double seconds = static_cast<double>(*now_ms_ - previous.ms) / 1000.0;
  const Reading before = previous;
  previous = now;
  if (seconds <= 0) {
    stalled_ = true;
    return;
  }
  auto r = counter_rate(before.value, counter.value, seconds);
  if (!r) {
    std::string what = series_text(counter);
    if (std::find(backwards_.begin(), backwards_.end(), what) == backwards_.end())
      backwards_.push_back(std::move(what));
    return;
  }
  const Unit unit = rate_unit(row.unit).value_or(Unit::per_second);
  double value = *r;
  if (unit == Unit::ratio) value = std::min(value, 1.0);  // time busy per second: skew only
  MetricValue gauge;
  gauge.name = row.rate;
  gauge.labels = counter.labels;  // before push_back: `counter` may live in `out`
  gauge.value = value;
  gauge.unit = to_string(unit);
  gauge.kind = MetricKind::gauge;
  derived_.push_back(out.size());
  out.push_back(std::move(gauge));
}

RateDeriver::Notes RateDeriver::finish(bool complete, std::vector<MetricValue>& out) {
  wants_clock_ = any_counter_;
  // A counter that went back means its device's counters were reset together (a driver reload,
  // a replugged disk): one that stayed at 0 may have hidden a rise. No rate of that label set.
  if (!backwards_.empty() && !derived_.empty()) {
    std::vector<char> drop(out.size(), 0);
    for (std::size_t i : derived_)
      if (i < out.size() &&
          std::find(backwards_.begin(), backwards_.end(), series_text(out[i])) != backwards_.end())
        drop[i] = 1;
    erase_flagged(out, drop);
  }
  if (complete && now_ms_ && !last_.empty())  // without a clock nothing was read into last_
    std::erase_if(last_, [&](const auto& entry) { return entry.second.sample != sample_; });
  Notes notes;
  if (!any_counter_) {
    last_backwards_.clear();
    return notes;
  }
  std::vector<std::string> parts;
  if (!now_ms_)
    parts.push_back(no_clock_reason_.empty() ? "first sample with counters: rates need two readings"
                                             : "no rates: " + no_clock_reason_);
  if (first_ && !had_baseline_) parts.push_back("first sample: rates need two readings");
  if (stalled_) parts.push_back("uptime did not advance since the previous sample, no rates");
  std::string backwards;
  if (!backwards_.empty()) {
    backwards =
        "counters went backwards (reset or wrapped), no rates this time for " + join(backwards_);
    parts.push_back(backwards);
  }
  for (const auto& p : parts) notes.status += (notes.status.empty() ? "" : "; ") + p;
  notes.log = backwards;
  notes.log_repeats = !backwards.empty() && backwards == last_backwards_;
  last_backwards_ = std::move(backwards);
  return notes;
}

}  // namespace kiwi::agent
