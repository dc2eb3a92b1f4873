// The webhook notifier: POSTs each notification as JSON in Alertmanager's webhook format to a
// URL, with libcurl (plugins/common/http_post), so receivers written for Alertmanager's
// webhook_config work unchanged.
#include <kiwi/notifier.hpp>
#include <string>

#include "http_post.hpp"
#include "webhook.hpp"

namespace {

using kiwi::OptionSpec;
using kiwi::OptionType;

const OptionSpec kOptions[] = {
    {"url", OptionType::string, "\"\"",
     "where to POST, e.g. \"https://hooks.example.com/kiwi\" (required)"},
    kiwi_http::kTimeoutOption,
    kiwi_http::kHeadersOption,
    kiwi_http::kBasicAuthOption,
    kiwi_http::kBearerTokenFileOption,
};

class Webhook final : public kiwi::Notifier {
 public:
  explicit Webhook(const kiwi::NotifierContext& ctx)
      : receiver_(ctx.instance_name),
        client_(kiwi_http::target_from(ctx.options, "https://hooks.example.com/kiwi",
                                       "bearer_token_file"),
                "kiwi-agent/" + std::string(ctx.agent_version)) {}

  kiwi::WriteResult send(const kiwi::Notification& notification) override {
    if (notification.alerts.empty()) return kiwi::WriteResult::ok("no alerts to send");
    static const std::string kHeaders[] = {"Content-Type: application/json"};
    return client_.post(kiwi_webhook::webhook_body(notification, receiver_), kHeaders);
  }

 private:
  std::string receiver_;
  kiwi_http::Client client_;
};

}  // namespace

KIWI_NOTIFIER_PLUGIN(Webhook, "webhook",
                     "alerts as JSON in Alertmanager's webhook format (version 4) to a URL",
                     kOptions)
