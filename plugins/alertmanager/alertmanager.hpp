// Alertmanager's API v2, the pure parts: where alerts go and the body of POST /api/v2/alerts (a
// JSON array of postableAlert: labels, annotations, startsAt, endsAt, generatorURL, as
// Alertmanager 0.25's api/v2/openapi.yaml defines them). The HTTP call is in plugin.cpp.
#pragma once

#include <kiwi/model.hpp>
#include <string>
#include <string_view>

namespace kiwi_alertmanager {

// The alerts endpoint of an Alertmanager at `base` ("http://host:9093", with or without a
// trailing slash or a path prefix, as --web.route-prefix has it): base + "/api/v2/alerts". A url
// that already ends so is taken as it is.
std::string alerts_url(std::string_view base);

// The body: one postableAlert per notice, in the notification's order.
//   labels       kiwi_notify::alert_labels: alertname, severity, instance, sensor, the series'
//   annotations  summary, value, threshold (each when there is one)
//   startsAt     when the condition began to hold
//   endsAt       resolved: when it resolved, but never later than `now` (an endsAt still ahead
//                of Alertmanager's clock keeps the alert firing there), `now` if the notice
//                names no time; firing: the notice's ends_at when it names one, else left out
//                (Alertmanager then holds it firing for its resolve_timeout, 5m by default,
//                unless it is sent again)
//   generatorURL the agent's URL, when configured
std::string alerts_body(const kiwi::Notification& notification, double now);

}  // namespace kiwi_alertmanager
