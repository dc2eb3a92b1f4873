// The ntfy notifier: one plain-text POST per alert to an ntfy topic (https://ntfy.sh/<topic> or a
// server of one's own), with its title, priority and tags as headers, through libcurl
// (plugins/common/http_post). Phones subscribed to the topic get it as a push notification.
#include <kiwi/notifier.hpp>
#include <set>
#include <string>

#include "alert_format.hpp"
#include "http_post.hpp"
#include "ntfy.hpp"

namespace {

using kiwi::OptionSpec;
using kiwi::OptionType;

const OptionSpec kOptions[] = {
    {"url", OptionType::string, "\"\"",
     "the topic's URL, server and topic: e.g. \"https://ntfy.sh/mytopic\" (required)"},
    kiwi_http::kTimeoutOption,
    {"token_file", OptionType::string, "\"\"",
     "a file whose first line is an ntfy access token (tk_...), sent as Authorization: Bearer "
     "(\"\": none)"},
    kiwi_http::kBasicAuthOption,
    kiwi_http::kHeadersOption,
    {"priority", OptionType::string_table, "{}",
     "ntfy priorities (1..5 or min, low, default, high, max) over the defaults "
     "{ critical = \"5\", warning = \"4\", info = \"3\", resolved = \"2\" }"},
};

class Ntfy final : public kiwi::Notifier {
 public:
  explicit Ntfy(const kiwi::NotifierContext& ctx)
      : priorities_(kiwi_ntfy::priorities_from(ctx.options.get_table("priority"))),
        client_(kiwi_http::target_from(ctx.options, "https://ntfy.sh/mytopic", "token_file"),
                "kiwi-agent/" + std::string(ctx.agent_version)) {}

  // One message per alert, in order. When one fails, the call fails with it and the agent sends
  // the notification again later: the alerts this object already delivered of it are not sent
  // twice (the next attempt skips them), the others go in order.
  kiwi::WriteResult send(const kiwi::Notification& notification) override {
    kiwi::WriteResult dropped = kiwi::WriteResult::ok();
    for (const auto& alert : notification.alerts) {
      const std::string key = key_of(alert);
      if (delivered_.count(key)) continue;
      const kiwi_ntfy::Message m = kiwi_ntfy::message(alert, notification, priorities_);
      kiwi::WriteResult r = client_.post(m.body, kiwi_ntfy::headers(m));
      if (r.status == kiwi::WriteStatus::retry) {
        if (!delivered_.empty())
          r.reason += " (" + std::to_string(delivered_.size()) + " of its " +
                      std::to_string(notification.alerts.size()) +
                      " alerts sent before; not sent again)";
        return r;
      }
      delivered_.insert(key);
      if (r.status == kiwi::WriteStatus::drop && dropped.status == kiwi::WriteStatus::ok)
        dropped = kiwi::WriteResult::drop(alert.name + ": " + r.reason);
    }
    delivered_.clear();
    return dropped;
  }

 private:
  // What tells one alert of a notification from another, and from the same alert's next
  // transition.
  static std::string key_of(const kiwi::AlertNotice& a) {
    return kiwi_notify::fingerprint(kiwi_notify::alert_labels(a, {})) + (a.firing ? "+" : "-") +
           std::to_string(a.sequence) + "@" + kiwi_notify::rfc3339(a.starts_at);
  }

  kiwi_ntfy::Priorities priorities_;
  kiwi_http::Client client_;
  std::set<std::string> delivered_;  // of the notification the last call failed on
};

}  // namespace

KIWI_NOTIFIER_PLUGIN(Ntfy, "ntfy", "alerts to an ntfy topic: one push notification per alert",
                     kOptions)
