#include "alertmanager.hpp"

#include <algorithm>
#include <kiwi/json.hpp>

#include "alert_format.hpp"

namespace kiwi_alertmanager {

std::string alerts_url(std::string_view base) {
  constexpr std::string_view kPath = "/api/v2/alerts";
  if (base.ends_with(kPath)) return std::string(base);
  while (base.ends_with('/')) base.remove_suffix(1);
  return std::string(base) + std::string(kPath);
}

std::string alerts_body(const kiwi::Notification& notification, double now) {
  std::string out = "[";
  for (const auto& a : notification.alerts) {
    if (out.size() > 1) out.push_back(',');
    out += "{\"labels\":";
    kiwi_notify::append_json_object(out, kiwi_notify::alert_labels(a, notification.host));
    out += ",\"annotations\":";
    kiwi_notify::append_json_object(out, kiwi_notify::alert_annotations(a));
    if (a.starts_at > 0) {
      out += ",\"startsAt\":";
      kiwi::append_json_string(out, kiwi_notify::rfc3339(a.starts_at));
    }
    // A resolve's endsAt is never ahead of now: Alertmanager takes an endsAt still ahead of its
    // clock for a firing alert, and keeps the later endsAt it had.
    const double ends_at = a.firing ? a.ends_at : a.ends_at > 0 ? std::min(a.ends_at, now) : now;
    if (ends_at > 0) {
      out += ",\"endsAt\":";
      kiwi::append_json_string(out, kiwi_notify::rfc3339(ends_at));
    }
    if (!notification.agent_url.empty()) {
      out += ",\"generatorURL\":";
      kiwi::append_json_string(out, notification.agent_url);
    }
    out.push_back('}');
  }
  return out + "]";
}

}  // namespace kiwi_alertmanager
