// The alertmanager notifier: POSTs each notification to an Alertmanager's API v2
// (POST <url>/api/v2/alerts) with libcurl (plugins/common/http_post). Alertmanager groups,
// deduplicates, silences and routes them to its receivers; the agent sends every firing and
// resolve and re-sends what fires, as Prometheus does.
#include <chrono>
#include <kiwi/notifier.hpp>
#include <string>

#include "alertmanager.hpp"
#include "http_post.hpp"

namespace {

using kiwi::OptionSpec;
using kiwi::OptionType;

const OptionSpec kOptions[] = {
    {"url", OptionType::string, "\"\"",
     "the Alertmanager, e.g. \"http://127.0.0.1:9093\": alerts go to <url>/api/v2/alerts "
     "(required)"},
    kiwi_http::kTimeoutOption,
    kiwi_http::kHeadersOption,
    kiwi_http::kBasicAuthOption,
    kiwi_http::kBearerTokenFileOption,
};

class Alertmanager final : public kiwi::Notifier {
 public:
  explicit Alertmanager(const kiwi::NotifierContext& ctx)
      : client_(target(ctx.options), "kiwi-agent/" + std::string(ctx.agent_version)) {}

  kiwi::WriteResult send(const kiwi::Notification& notification) override {
    if (notification.alerts.empty()) return kiwi::WriteResult::ok("no alerts to send");
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    static const std::string kHeaders[] = {"Content-Type: application/json"};
    return client_.post(kiwi_alertmanager::alerts_body(notification, now), kHeaders);
  }

 private:
  static kiwi_http::Target target(const kiwi::Options& options) {
    kiwi_http::Target t =
        kiwi_http::target_from(options, "http://127.0.0.1:9093", "bearer_token_file");
    t.url = kiwi_alertmanager::alerts_url(t.url);
    return t;
  }
  kiwi_http::Client client_;
};

}  // namespace

KIWI_NOTIFIER_PLUGIN(Alertmanager, "alertmanager",
                     "alerts to a Prometheus Alertmanager (API v2, POST /api/v2/alerts)", kOptions)
