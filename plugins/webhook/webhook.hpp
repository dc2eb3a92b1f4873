// Alertmanager's webhook format (webhook_config, payload version 4), the pure part: the JSON body,
// so that a receiver written for Alertmanager takes the agent's notifications as they are. The
// HTTP call is in plugin.cpp.
#pragma once

#include <kiwi/model.hpp>
#include <string>
#include <string_view>

namespace kiwi_webhook {

// The group key: one group per agent, `{}/{instance="<host>"}:{}` (Alertmanager's shape: the
// route's matchers, then the group's labels, none here).
std::string group_key(std::string_view host);

// The body, its members in the order Alertmanager writes them:
//   receiver           `receiver` (the [[notify]] name)
//   status             "firing" when any alert in it fires, else "resolved"
//   alerts             each notice: status, labels, annotations (kiwi_notify), startsAt, endsAt
//                      (when it resolved; "0001-01-01T00:00:00Z" while firing, as Alertmanager
//                      writes it), generatorURL (the agent's URL or ""), fingerprint
//   groupLabels        {}
//   commonLabels       the labels every alert has with the same value
//   commonAnnotations  likewise of the annotations
//   externalURL        the agent's URL or ""
//   version "4", groupKey (group_key), truncatedAlerts 0
std::string webhook_body(const kiwi::Notification& notification, std::string_view receiver);

}  // namespace kiwi_webhook
