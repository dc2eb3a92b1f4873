// The alertmanager notifier's body: Alertmanager API v2's postableAlert array, worked out by hand
// from notice_support.hpp's notices.
#include <catch2/catch.hpp>

#include "alertmanager.hpp"
#include "notice_support.hpp"

using namespace kiwi_alertmanager;
using namespace kiwi_notice_test;

TEST_CASE("alertmanager: alerts go to <url>/api/v2/alerts, whatever the url's end") {
  CHECK(alerts_url("http://127.0.0.1:9093") == "http://127.0.0.1:9093/api/v2/alerts");
  CHECK(alerts_url("http://127.0.0.1:9093/") == "http://127.0.0.1:9093/api/v2/alerts");
  CHECK(alerts_url("https://am.lan/prefix") == "https://am.lan/prefix/api/v2/alerts");
  CHECK(alerts_url("http://am:9093/api/v2/alerts") == "http://am:9093/api/v2/alerts");
}

TEST_CASE("alertmanager: a firing alert with its labels, annotations, times and the agent's URL") {
  CHECK(alerts_body(notification({soc_hot()}), 1700000400) ==
        R"([{"labels":{"alertname":"soc_hot","instance":"kiwipi","sensor":"thermal",)"
        R"("severity":"warning","zone":"soc"},)"
        R"("annotations":{"summary":"soc at 85.2 °C","threshold":"80","value":"85.2"},)"
        R"("startsAt":"2023-11-14T22:13:20.25Z","endsAt":"2023-11-14T22:18:20Z",)"
        R"("generatorURL":"http://kiwipi:8095/"}])");
}

TEST_CASE("alertmanager: a firing alert with no hold time has no endsAt, a resolved one has one") {
  kiwi::AlertNotice hot = soc_hot();
  hot.ends_at = 0;
  kiwi::Notification n = notification({hot, sensor_failing_resolved()});
  n.agent_url.clear();
  CHECK(alerts_body(n, 1700000400) ==
        R"([{"labels":{"alertname":"soc_hot","instance":"kiwipi","sensor":"thermal",)"
        R"("severity":"warning","zone":"soc"},)"
        R"("annotations":{"summary":"soc at 85.2 °C","threshold":"80","value":"85.2"},)"
        R"("startsAt":"2023-11-14T22:13:20.25Z"},)"
        R"({"labels":{"alertname":"sensor_failing","instance":"kiwipi","sensor":"storage",)"
        R"("severity":"critical"},"annotations":{},)"
        R"("startsAt":"2023-11-14T22:13:20Z","endsAt":"2023-11-14T22:15:25Z"}])");
  // A resolve that names no time ends now: left without endsAt it would read as firing. One
  // that names a time still ahead of the clock ends now too: Alertmanager would keep it firing.
  kiwi::AlertNotice gone = sensor_failing_resolved();
  gone.ends_at = 0;
  CHECK_THAT(alerts_body(notification({gone}), 1700000400),
             Catch::Contains(R"("endsAt":"2023-11-14T22:20:00Z")"));
  gone.ends_at = 1700000401;
  CHECK_THAT(alerts_body(notification({gone}), 1700000400),
             Catch::Contains(R"("endsAt":"2023-11-14T22:20:00Z")"));
}
