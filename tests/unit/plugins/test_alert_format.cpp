// plugins/common/alert_format: what the notifiers say of an alert in Alertmanager's shapes.
#include <catch2/catch.hpp>
#include <cmath>

#include "alert_format.hpp"
#include "notice_support.hpp"

using namespace kiwi_notify;
using kiwi_notice_test::soc_hot;

TEST_CASE("alert format: times are RFC 3339 in UTC as Alertmanager writes them, cut to the ms") {
  CHECK(rfc3339(1700000000) == "2023-11-14T22:13:20Z");
  CHECK(rfc3339(1700000000.25) == "2023-11-14T22:13:20.25Z");
  CHECK(rfc3339(1700000000.5) == "2023-11-14T22:13:20.5Z");
  CHECK(rfc3339(1700000000.123) == "2023-11-14T22:13:20.123Z");
  CHECK(rfc3339(1700000000.0004) == "2023-11-14T22:13:20Z");  // below a millisecond
  // Never later than the time itself: an endsAt rounded up would still be ahead of
  // Alertmanager's clock when it arrives, and keep the alert firing.
  CHECK(rfc3339(1700000039.9996) == "2023-11-14T22:13:59.999Z");
  CHECK(rfc3339(0) == "1970-01-01T00:00:00Z");
  CHECK(rfc3339(951782400) == "2000-02-29T00:00:00Z");  // a leap day
}

TEST_CASE("alert format: values as /api/alerts writes them, durations as the config does") {
  CHECK(number_text(85.2) == "85.2");
  CHECK(number_text(80) == "80");
  CHECK(number_text(0.905) == "0.905");
  CHECK(number_text(-3) == "-3");
  CHECK(duration_text(42) == "42s");
  CHECK(duration_text(125) == "2m5s");
  CHECK(duration_text(3725.4) == "1h2m5s");
  CHECK(duration_text(90000) == "1d1h");
  CHECK(duration_text(0.2) == "0s");
}

TEST_CASE("alert format: labels are the series', with sensor, instance, alertname and severity") {
  CHECK(alert_labels(soc_hot(), "kiwipi") == Labels{{"alertname", "soc_hot"},
                                                    {"instance", "kiwipi"},
                                                    {"sensor", "thermal"},
                                                    {"severity", "warning"},
                                                    {"zone", "soc"}});
  // A series' own instance and sensor stay (an exec sensor's scrape target, thermal's chip
  // sensor); alertname and severity are the rule's.
  kiwi::AlertNotice a = soc_hot();
  a.labels = {
      {"alertname", "x"}, {"instance", "nas:9100"}, {"sensor", "cpu_thermal"}, {"severity", "low"}};
  CHECK(alert_labels(a, "kiwipi") == Labels{{"alertname", "soc_hot"},
                                            {"instance", "nas:9100"},
                                            {"sensor", "cpu_thermal"},
                                            {"severity", "warning"}});
  // No host and no sensor: neither label.
  a = soc_hot();
  a.sensor.clear();
  CHECK(alert_labels(a, "") ==
        Labels{{"alertname", "soc_hot"}, {"severity", "warning"}, {"zone", "soc"}});
}

TEST_CASE("alert format: annotations are the summary, the value and the threshold, NaN left out") {
  CHECK(alert_annotations(soc_hot()) ==
        Labels{{"summary", "soc at 85.2 °C"}, {"threshold", "80"}, {"value", "85.2"}});
  kiwi::AlertNotice a = soc_hot();
  a.threshold = std::nan("");
  a.summary.clear();
  CHECK(alert_annotations(a) == Labels{{"value", "85.2"}});
  a.value = std::nan("");
  CHECK(alert_annotations(a).empty());
}

TEST_CASE("alert format: a fingerprint is Prometheus' FNV-1a of the sorted labels") {
  // FNV-1a 64 over alertname 0xff soc_hot 0xff instance 0xff ... in name order: worked out with
  // a few lines of Python beside the Go source (prometheus/common model/signature.go); the
  // integration test checks it against a real Alertmanager's webhook.
  const Labels labels = {{"alertname", "soc_hot"},
                         {"instance", "kiwipi"},
                         {"sensor", "thermal"},
                         {"severity", "warning"},
                         {"zone", "soc"}};
  CHECK(fingerprint(labels) == "28c70e05ed35d07a");
  Labels shuffled = {labels[4], labels[1], labels[0], labels[3], labels[2]};
  CHECK(fingerprint(shuffled) == "28c70e05ed35d07a");  // the order given does not matter
  CHECK(fingerprint({}) == "cbf29ce484222325");        // FNV-1a's offset basis
}

TEST_CASE("alert format: a JSON object of labels escapes what JSON needs escaped") {
  std::string out;
  append_json_object(out, {{"a", "x\"y"}, {"b", "line\nbreak"}});
  CHECK(out == R"({"a":"x\"y","b":"line\nbreak"})");
  out.clear();
  append_json_object(out, {});
  CHECK(out == "{}");
}
