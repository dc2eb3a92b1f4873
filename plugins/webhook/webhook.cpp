#include "webhook.hpp"

#include <algorithm>
#include <kiwi/json.hpp>

#include "alert_format.hpp"

namespace kiwi_webhook {

namespace {

using kiwi_notify::Labels;

// The pairs every list holds (the lists are sorted by name, each name once).
Labels common(const std::vector<Labels>& lists) {
  if (lists.empty()) return {};
  Labels out = lists.front();
  for (const auto& l : lists)
    std::erase_if(out,
                  [&](const auto& pair) { return !std::binary_search(l.begin(), l.end(), pair); });
  return out;
}

}  // namespace

std::string group_key(std::string_view host) {
  std::string out = "{}/{instance=";
  kiwi::append_json_string(out, host);
  return out + "}:{}";
}

std::string webhook_body(const kiwi::Notification& notification, std::string_view receiver) {
  std::vector<Labels> labels, annotations;
  bool firing = false;
  for (const auto& a : notification.alerts) {
    labels.push_back(kiwi_notify::alert_labels(a, notification.host));
    annotations.push_back(kiwi_notify::alert_annotations(a));
    firing |= a.firing;
  }
  std::string out = "{\"receiver\":";
  kiwi::append_json_string(out, receiver);
  out += firing ? ",\"status\":\"firing\",\"alerts\":[" : ",\"status\":\"resolved\",\"alerts\":[";
  for (std::size_t i = 0; i < notification.alerts.size(); ++i) {
    const auto& a = notification.alerts[i];
    if (i) out.push_back(',');
    out += a.firing ? "{\"status\":\"firing\",\"labels\":" : "{\"status\":\"resolved\",\"labels\":";
    kiwi_notify::append_json_object(out, labels[i]);
    out += ",\"annotations\":";
    kiwi_notify::append_json_object(out, annotations[i]);
    out += ",\"startsAt\":";
    kiwi::append_json_string(
        out, a.starts_at > 0 ? kiwi_notify::rfc3339(a.starts_at) : kiwi_notify::kZeroTime);
    out += ",\"endsAt\":";
    kiwi::append_json_string(
        out, !a.firing && a.ends_at > 0 ? kiwi_notify::rfc3339(a.ends_at) : kiwi_notify::kZeroTime);
    out += ",\"generatorURL\":";
    kiwi::append_json_string(out, notification.agent_url);
    out += ",\"fingerprint\":";
    kiwi::append_json_string(out, kiwi_notify::fingerprint(labels[i]));
    out.push_back('}');
  }
  out += "],\"groupLabels\":{},\"commonLabels\":";
  kiwi_notify::append_json_object(out, common(labels));
  out += ",\"commonAnnotations\":";
  kiwi_notify::append_json_object(out, common(annotations));
  out += ",\"externalURL\":";
  kiwi::append_json_string(out, notification.agent_url);
  out += ",\"version\":\"4\",\"groupKey\":";
  kiwi::append_json_string(out, group_key(notification.host));
  return out + ",\"truncatedAlerts\":0}";
}

}  // namespace kiwi_webhook
