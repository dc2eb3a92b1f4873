// Two notices and a notification written by hand, for the notifiers' formatting tests: the times
// are 2023-11-14T22:13:20Z (unix 1700000000) and a little after, so each expected text can be
// worked out on paper.
#pragma once

#include <kiwi/model.hpp>
#include <limits>

namespace kiwi_notice_test {

// soc_hot fires on the thermal sensor's zone "soc": a warning with a value, a threshold, a
// start a quarter of a second past 22:13:20 and a hold time (ends_at) five minutes on.
inline kiwi::AlertNotice soc_hot() {
  kiwi::AlertNotice a;
  a.name = "soc_hot";
  a.labels = {{"zone", "soc"}};
  a.sensor = "thermal";
  a.severity = kiwi::Severity::warning;
  a.firing = true;
  a.summary = "soc at 85.2 °C";
  a.value = 85.2;
  a.threshold = 80;
  a.starts_at = 1700000000.25;
  a.ends_at = 1700000300;
  a.sequence = 7;
  return a;
}

// sensor_failing resolved on the storage sensor: a critical status rule, with no labels, no
// summary, no value and no threshold (NaN), resolved 2m5s after it began.
inline kiwi::AlertNotice sensor_failing_resolved() {
  kiwi::AlertNotice a;
  a.name = "sensor_failing";
  a.sensor = "storage";
  a.severity = kiwi::Severity::critical;
  a.firing = false;
  a.value = std::numeric_limits<double>::quiet_NaN();
  a.threshold = std::numeric_limits<double>::quiet_NaN();
  a.starts_at = 1700000000;
  a.ends_at = 1700000125;
  a.sequence = 8;
  return a;
}

inline kiwi::Notification notification(std::vector<kiwi::AlertNotice> alerts) {
  kiwi::Notification n;
  n.alerts = std::move(alerts);
  n.host = "kiwipi";
  n.agent_url = "http://kiwipi:8095/";
  return n;
}

}  // namespace kiwi_notice_test
