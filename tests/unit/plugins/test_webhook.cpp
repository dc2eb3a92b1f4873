// The webhook notifier's body: Alertmanager's webhook payload (version 4), worked out by hand from
// notice_support.hpp's notices.
#include <catch2/catch.hpp>

#include "notice_support.hpp"
#include "webhook.hpp"

using namespace kiwi_webhook;
using namespace kiwi_notice_test;

TEST_CASE("webhook: one alert firing, every member in Alertmanager's order") {
  CHECK(webhook_body(notification({soc_hot()}), "ops") ==
        R"({"receiver":"ops","status":"firing","alerts":[{"status":"firing",)"
        R"("labels":{"alertname":"soc_hot","instance":"kiwipi","sensor":"thermal",)"
        R"("severity":"warning","zone":"soc"},)"
        R"("annotations":{"summary":"soc at 85.2 °C","threshold":"80","value":"85.2"},)"
        R"("startsAt":"2023-11-14T22:13:20.25Z","endsAt":"0001-01-01T00:00:00Z",)"
        R"("generatorURL":"http://kiwipi:8095/","fingerprint":"28c70e05ed35d07a"}],)"
        R"("groupLabels":{},)"
        R"("commonLabels":{"alertname":"soc_hot","instance":"kiwipi","sensor":"thermal",)"
        R"("severity":"warning","zone":"soc"},)"
        R"("commonAnnotations":{"summary":"soc at 85.2 °C","threshold":"80","value":"85.2"},)"
        R"("externalURL":"http://kiwipi:8095/","version":"4",)"
        R"("groupKey":"{}/{instance=\"kiwipi\"}:{}","truncatedAlerts":0})");
}

TEST_CASE("webhook: firing while any alert fires, and common labels are those all alerts share") {
  const std::string body =
      webhook_body(notification({soc_hot(), sensor_failing_resolved()}), "ops");
  CHECK_THAT(body, Catch::StartsWith(R"({"receiver":"ops","status":"firing","alerts":[)"));
  CHECK_THAT(body, Catch::Contains(
                       R"({"status":"resolved","labels":{"alertname":"sensor_failing",)"
                       R"("instance":"kiwipi","sensor":"storage","severity":"critical"},)"
                       R"("annotations":{},"startsAt":"2023-11-14T22:13:20Z",)"
                       R"("endsAt":"2023-11-14T22:15:25Z","generatorURL":"http://kiwipi:8095/",)"
                       R"("fingerprint":"a4fd5e0ac5d425a6"}])"));
  CHECK_THAT(body, Catch::Contains(R"("commonLabels":{"instance":"kiwipi"},)"
                                   R"("commonAnnotations":{},)"));
  CHECK_THAT(webhook_body(notification({sensor_failing_resolved()}), "ops"),
             Catch::StartsWith(R"({"receiver":"ops","status":"resolved",)"));
}

TEST_CASE("webhook: without an agent URL the URLs are empty, as Alertmanager leaves them") {
  kiwi::Notification n = notification({soc_hot()});
  n.agent_url.clear();
  const std::string body = webhook_body(n, "ops");
  CHECK_THAT(body, Catch::Contains(R"("generatorURL":"",)"));
  CHECK_THAT(body, Catch::Contains(R"("externalURL":"",)"));
  CHECK(group_key("pi \"4\"") == R"({}/{instance="pi \"4\""}:{})");
}
