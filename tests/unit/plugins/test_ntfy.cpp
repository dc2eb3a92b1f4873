// The ntfy notifier's messages: title, priority, tags and body of each alert, worked out by hand
// from notice_support.hpp's notices, and the headers that carry them.
#include <catch2/catch.hpp>

#include "notice_support.hpp"
#include "ntfy.hpp"

using namespace kiwi_ntfy;
using namespace kiwi_notice_test;

TEST_CASE("ntfy: a firing warning: its title, priority 4, a siren and a warning sign") {
  const Message m = message(soc_hot(), notification({soc_hot()}), {});
  CHECK(m.title == "[FIRING] soc_hot on kiwipi");
  CHECK(m.priority == 4);
  CHECK(m.tags == "rotating_light,warning");
  CHECK(m.click == "http://kiwipi:8095/");
  CHECK(m.body == "soc at 85.2 °C\nvalue 85.2 (threshold 80)\nlabels: sensor=thermal, zone=soc");
  CHECK(headers(m) == std::vector<std::string>{"Content-Type: text/plain; charset=utf-8",
                                               "Title: [FIRING] soc_hot on kiwipi", "Priority: 4",
                                               "Tags: rotating_light,warning",
                                               "Click: http://kiwipi:8095/"});
}

TEST_CASE("ntfy: a resolve: priority 2, a check mark, and how long it lasted") {
  const Message m =
      message(sensor_failing_resolved(), notification({sensor_failing_resolved()}), {});
  CHECK(m.title == "[RESOLVED] sensor_failing on kiwipi");
  CHECK(m.priority == 2);
  CHECK(m.tags == "white_check_mark");
  CHECK(m.body == "sensor_failing resolved\nresolved after 2m5s\nlabels: sensor=storage");
}

TEST_CASE("ntfy: priorities by severity, 5 4 3 and 2, and as the priority option sets them") {
  kiwi::AlertNotice a = soc_hot();
  const auto n = notification({a});
  a.severity = kiwi::Severity::critical;
  CHECK(message(a, n, {}).priority == 5);
  CHECK(message(a, n, {}).tags == "rotating_light,critical");
  a.severity = kiwi::Severity::info;
  CHECK(message(a, n, {}).priority == 3);
  const Priorities p =
      priorities_from({{"info", "min"}, {"resolved", "1"}, {"critical", "urgent"}});
  CHECK(p.critical == 5);
  CHECK(p.warning == 4);
  CHECK(p.info == 1);
  CHECK(p.resolved == 1);
  CHECK(message(a, n, p).priority == 1);
  CHECK_THROWS_WITH(priorities_from({{"warning", "loud"}}),
                    "priority.warning: \"loud\" is not an ntfy priority: 1..5, min, low, default, "
                    "high, max or urgent");
  CHECK_THROWS_WITH(priorities_from({{"page", "5"}}),
                    "priority: unknown key 'page'; accepted: critical, warning, info, resolved");
  CHECK_THROWS(priorities_from({{"info", "6"}}));
}

TEST_CASE("ntfy: a header that is not plain ASCII goes as RFC 2047, so no line break gets in") {
  CHECK(header_value("[FIRING] hot on kitchen") == "[FIRING] hot on kitchen");
  // base64 of the UTF-8 bytes, worked out with Python's base64 module.
  CHECK(header_value("[FIRING] hot on Küche") == "=?UTF-8?B?W0ZJUklOR10gaG90IG9uIEvDvGNoZQ==?=");
  CHECK(header_value("a\r\nX-Evil: 1") == "=?UTF-8?B?YQ0KWC1FdmlsOiAx?=");
  kiwi::Notification n = notification({soc_hot()});
  n.agent_url.clear();
  n.host.clear();
  const Message m = message(soc_hot(), n, {});
  CHECK(m.title == "[FIRING] soc_hot");
  CHECK(headers(m).size() == 4);  // no Click without a URL
}
