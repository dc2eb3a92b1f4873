// ntfy's publishing API (https://docs.ntfy.sh/publish/), the pure parts: one plain-text message
// per alert, its title, priority, tags and click action as request headers. The HTTP call is in
// plugin.cpp.
#pragma once

#include <kiwi/model.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiwi_ntfy {

// The ntfy priority (1 min, 2 low, 3 default, 4 high, 5 max) of a firing alert of each severity
// and of a resolved one.
struct Priorities {
  int critical = 5;
  int warning = 4;
  int info = 3;
  int resolved = 2;
};

// The `priority` option's table over the defaults: keys critical, warning, info and resolved;
// values 1..5 or ntfy's names (min, low, default, high, max, urgent). Throws std::runtime_error
// naming the key and the value, and what is accepted.
Priorities priorities_from(const std::vector<std::pair<std::string, std::string>>& table);

struct Message {
  std::string title;  // "[FIRING] soc_hot on kiwipi", "[RESOLVED] soc_hot on kiwipi"
  int priority = 3;
  std::string tags;   // emoji short codes and words: "rotating_light,warning", "white_check_mark"
  std::string click;  // the agent's URL, opened when the notification is tapped ("": none)
  std::string body;   // the summary, the value, and the labels that tell instances apart
};

// The message of one alert of `notification`:
//   title     [FIRING] or [RESOLVED], the alert's name, "on" the host
//   priority  firing: its severity's; resolved: `resolved`
//   tags      firing: rotating_light (🚨) and the severity (warning is ⚠️ in ntfy); resolved:
//             white_check_mark (✅)
//   body      the summary (or "<name> is firing" / "<name> resolved"), then "value V (threshold
//             T)" when there is a value, "resolved after 5m12s" when resolved, "labels: k=v, ..."
//             (the series' labels and its sensor) when there are any
Message message(const kiwi::AlertNotice& alert, const kiwi::Notification& notification,
                const Priorities& priorities);

// The request headers of a message ("Name: value"): Title, Priority, Tags, Click (when set) and
// the Content-Type of the body.
std::vector<std::string> headers(const Message& message);

// `value` as it may stand in a header: printable ASCII as it is; anything else (UTF-8, a line
// break) as RFC 2047's "=?UTF-8?B?<base64>?=", which ntfy decodes.
std::string header_value(std::string_view value);

}  // namespace kiwi_ntfy
