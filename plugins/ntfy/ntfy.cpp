#include "ntfy.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "alert_format.hpp"

namespace kiwi_ntfy {

namespace {

// 1..5 or one of ntfy's names for them; 0 when neither.
int priority_of(std::string_view v) {
  if (v.size() == 1 && v[0] >= '1' && v[0] <= '5') return v[0] - '0';
  constexpr std::pair<std::string_view, int> kNames[] = {{"min", 1},  {"low", 2}, {"default", 3},
                                                         {"high", 4}, {"max", 5}, {"urgent", 5}};
  for (auto [name, p] : kNames)
    if (v == name) return p;
  return 0;
}

std::string base64(std::string_view in) {
  static constexpr char kDigits[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < in.size(); i += 3) {
    std::uint32_t n = static_cast<unsigned char>(in[i]) << 16;
    if (i + 1 < in.size()) n |= static_cast<unsigned char>(in[i + 1]) << 8;
    if (i + 2 < in.size()) n |= static_cast<unsigned char>(in[i + 2]);
    out.push_back(kDigits[(n >> 18) & 63]);
    out.push_back(kDigits[(n >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? kDigits[(n >> 6) & 63] : '=');
    out.push_back(i + 2 < in.size() ? kDigits[n & 63] : '=');
  }
  return out;
}

}  // namespace

Priorities priorities_from(const std::vector<std::pair<std::string, std::string>>& table) {
  Priorities p;
  for (const auto& [key, value] : table) {
    int* slot = key == "critical"   ? &p.critical
                : key == "warning"  ? &p.warning
                : key == "info"     ? &p.info
                : key == "resolved" ? &p.resolved
                                    : nullptr;
    if (!slot)
      throw std::runtime_error("priority: unknown key '" + key +
                               "'; accepted: critical, warning, info, resolved");
    *slot = priority_of(value);
    if (*slot == 0)
      throw std::runtime_error("priority." + key + ": \"" + value +
                               "\" is not an ntfy priority: 1..5, min, low, default, high, "
                               "max or urgent");
  }
  return p;
}

Message message(const kiwi::AlertNotice& alert, const kiwi::Notification& notification,
                const Priorities& priorities) {
  Message m;
  m.title = (alert.firing ? "[FIRING] " : "[RESOLVED] ") + alert.name +
            (notification.host.empty() ? "" : " on " + notification.host);
  if (alert.firing) {
    const auto severity = kiwi::to_string(alert.severity);
    m.priority = alert.severity == kiwi::Severity::critical  ? priorities.critical
                 : alert.severity == kiwi::Severity::warning ? priorities.warning
                                                             : priorities.info;
    m.tags = "rotating_light," + std::string(severity);
  } else {
    m.priority = priorities.resolved;
    m.tags = "white_check_mark";
  }
  m.click = notification.agent_url;
  m.body = !alert.summary.empty() ? alert.summary
                                  : alert.name + (alert.firing ? " is firing" : " resolved");
  if (!std::isnan(alert.value)) {
    m.body += "\nvalue " + kiwi_notify::number_text(alert.value);
    if (!std::isnan(alert.threshold))
      m.body += " (threshold " + kiwi_notify::number_text(alert.threshold) + ")";
  }
  if (!alert.firing && alert.starts_at > 0 && alert.ends_at >= alert.starts_at)
    m.body += "\nresolved after " + kiwi_notify::duration_text(alert.ends_at - alert.starts_at);
  std::string labels;
  for (const auto& [k, v] : kiwi_notify::alert_labels(alert, {})) {
    if (k == "alertname" || k == "severity") continue;
    labels += (labels.empty() ? "" : ", ") + k + "=" + v;
  }
  if (!labels.empty()) m.body += "\nlabels: " + labels;
  return m;
}

std::vector<std::string> headers(const Message& message) {
  std::vector<std::string> out = {
      "Content-Type: text/plain; charset=utf-8", "Title: " + header_value(message.title),
      "Priority: " + std::to_string(message.priority), "Tags: " + header_value(message.tags)};
  if (!message.click.empty()) out.push_back("Click: " + header_value(message.click));
  return out;
}

std::string header_value(std::string_view value) {
  const bool plain = std::all_of(value.begin(), value.end(), [](char c) {
    return static_cast<unsigned char>(c) >= 0x20 && static_cast<unsigned char>(c) < 0x7f;
  });
  if (plain && !value.starts_with("=?")) return std::string(value);
  return "=?UTF-8?B?" + base64(value) + "?=";
}

}  // namespace kiwi_ntfy
