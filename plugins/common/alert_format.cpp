#include "alert_format.hpp"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <kiwi/json.hpp>

namespace kiwi_notify {

namespace {

void set_label(Labels& labels, std::string_view name, std::string_view value, bool replace) {
  for (auto& [k, v] : labels)
    if (k == name) {
      if (replace) v = std::string(value);
      return;
    }
  labels.emplace_back(name, value);
}

}  // namespace

std::string rfc3339(double unix_seconds) {
  // Cut, not rounded, to the millisecond (from the microsecond, so 0.123 stored as 0.12299...
  // stays .123): a time is never written later than it was, which for an endsAt would keep an
  // alert firing in Alertmanager.
  const std::int64_t us = std::llround(unix_seconds * 1e6);
  const std::int64_t ms = us >= 0 ? us / 1000 : (us - 999) / 1000;
  const std::int64_t whole = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
  const auto frac = static_cast<int>(ms - whole * 1000);
  const time_t t = static_cast<time_t>(whole);
  tm utc{};
  gmtime_r(&t, &utc);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec);
  std::string out = buf;
  if (frac != 0) {
    char digits[8];
    std::snprintf(digits, sizeof digits, ".%03d", frac);
    std::string_view f = digits;
    while (f.back() == '0') f.remove_suffix(1);
    out += f;
  }
  return out + "Z";
}

std::string number_text(double value) {
  std::string out;
  kiwi::append_json_number(out, value);
  return out;
}

std::string duration_text(double seconds) {
  auto s = static_cast<std::int64_t>(std::llround(std::max(seconds, 0.0)));
  std::string out;
  for (auto [unit, size] : {std::pair{'d', 86400}, {'h', 3600}, {'m', 60}})
    if (s >= size) {
      out += std::to_string(s / size) + unit;
      s %= size;
    }
  if (s > 0 || out.empty()) out += std::to_string(s) + "s";
  return out;
}

Labels alert_labels(const kiwi::AlertNotice& notice, std::string_view host) {
  Labels labels = notice.labels;
  if (!notice.sensor.empty()) set_label(labels, "sensor", notice.sensor, false);
  if (!host.empty()) set_label(labels, "instance", host, false);
  set_label(labels, "alertname", notice.name, true);
  set_label(labels, "severity", kiwi::to_string(notice.severity), true);
  std::sort(labels.begin(), labels.end());
  return labels;
}

Labels alert_annotations(const kiwi::AlertNotice& notice) {
  Labels out;
  if (!notice.summary.empty()) out.emplace_back("summary", notice.summary);
  if (!std::isnan(notice.threshold)) out.emplace_back("threshold", number_text(notice.threshold));
  if (!std::isnan(notice.value)) out.emplace_back("value", number_text(notice.value));
  std::sort(out.begin(), out.end());
  return out;
}

std::string fingerprint(const Labels& labels) {
  constexpr std::uint64_t kOffset = 14695981039346656037ull, kPrime = 1099511628211ull;
  std::vector<const std::pair<std::string, std::string>*> sorted;
  for (const auto& l : labels) sorted.push_back(&l);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  std::uint64_t h = kOffset;
  auto add = [&](std::string_view s) {
    for (unsigned char c : s) h = (h ^ c) * kPrime;
    h = (h ^ 0xffu) * kPrime;
  };
  for (const auto* l : sorted) {
    add(l->first);
    add(l->second);
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

void append_json_object(std::string& out, const Labels& labels) {
  out.push_back('{');
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (i) out.push_back(',');
    kiwi::append_json_string(out, labels[i].first);
    out.push_back(':');
    kiwi::append_json_string(out, labels[i].second);
  }
  out.push_back('}');
}

}  // namespace kiwi_notify
