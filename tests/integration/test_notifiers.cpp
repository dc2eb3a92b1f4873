// The notifier plugins as the agent runs them: each built plugin loaded through the real
// PluginLoader and sent notifications, to a real Alertmanager 0.25 (Debian's) that routes them to
// a webhook receiver this test runs, and to test receivers on loopback (receiver.hpp) that check
// the JSON, the headers and the credentials, or that answer 400, 429, 503, nothing, or are not
// there at all.
#include <rapidjson/document.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <mutex>

#include "alertmanager.hpp"
#include "harness.hpp"
#include "notice_support.hpp"
#include "options_support.hpp"
#include "plugin/plugin_loader.hpp"
#include "receiver.hpp"

using namespace kiwi_test;
using namespace std::chrono_literals;

namespace {

struct Log final : kiwi::Logger {
  std::mutex mutex;
  std::vector<std::string> lines;
  void log(kiwi::LogLevel, std::string_view m) override {
    std::lock_guard lock(mutex);
    lines.emplace_back(m);
  }
};

// A notifier plugin of the build (kiwi-notifier-<plugin>.so), as a [[notify]] named
// "n-<plugin>" with these options (TOML lines) would create it.
struct Notifier {
  Log log;
  kiwi::agent::PluginLoader loader{KIWI_PLUGIN_DIR, log};
  kiwi::agent::PluginInstance<kiwi::Notifier> instance;
  Notifier(const std::string& plugin, const std::string& options) {
    kiwi::agent::PluginEntry e;
    e.plugin = plugin;
    e.name = "n-" + plugin;
    e.pos = e.plugin_pos = {"kiwi.toml", 1, 1};
    e.options = kiwi::test::options_table("[options]\n" + options);
    instance = loader.create_notifier(e, "kiwipi", "0.3.0");
  }
  kiwi::WriteResult send(const kiwi::Notification& n) { return instance.object->send(n); }
};

double now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// notice_support.hpp's soc_hot, begun at `starts_at` and vouched for ten minutes.
kiwi::AlertNotice soc_hot(double starts_at) {
  kiwi::AlertNotice a = kiwi_notice_test::soc_hot();
  a.starts_at = starts_at;
  a.ends_at = starts_at + 600;
  return a;
}

kiwi::AlertNotice resolved(kiwi::AlertNotice a, double at) {
  a.firing = false;
  a.value = 71.5;
  a.ends_at = at;
  a.sequence += 1;
  return a;
}

using kiwi_notice_test::notification;

rapidjson::Document json(const std::string& text) {
  rapidjson::Document d;
  d.Parse(text.c_str(), text.size());
  if (d.HasParseError()) FAIL("not JSON: " << text);
  return d;
}

std::map<std::string, std::string> strings(const rapidjson::Value& object) {
  std::map<std::string, std::string> out;
  for (auto& m : object.GetObject()) out[m.name.GetString()] = m.value.GetString();
  return out;
}

const std::map<std::string, std::string> kHotLabels = {{"alertname", "soc_hot"},
                                                       {"instance", "kiwipi"},
                                                       {"sensor", "thermal"},
                                                       {"severity", "warning"},
                                                       {"zone", "soc"}};

// The webhooks `rx` got whose body says status `status`.
std::vector<ReceivedRequest> webhooks(const Receiver& rx, const std::string& status) {
  std::vector<ReceivedRequest> out;
  for (auto& r : rx.requests())
    if (r.body.find("\"status\":\"" + status + "\"") != std::string::npos) out.push_back(r);
  return out;
}

std::string secret_file(const TempDir& dir, const std::string& name, const std::string& text) {
  const auto path = dir.path / name;
  std::ofstream(path) << text << "\n";
  return path.string();
}

}  // namespace

TEST_CASE(
    "alertmanager: a real Alertmanager takes the firing alert, lists it and routes it to its "
    "webhook, then the resolve",
    "[slow]") {
  Receiver hook([](int) { return 200; });
  Alertmanager am(
      "route:\n  receiver: hook\n  group_by: ['alertname']\n  group_wait: 0s\n"
      "  group_interval: 1s\n  repeat_interval: 1h\n"
      "receivers:\n- name: hook\n  webhook_configs:\n  - url: '" +
      hook.base() + "/hook'\n    send_resolved: true\n");
  Notifier n("alertmanager", "url = \"" + am.url() + "\"\n");
  const kiwi::AlertNotice hot = soc_hot(now() - 30);
  const kiwi::WriteResult sent = n.send(notification({hot}));
  INFO(sent.reason);
  REQUIRE(sent.status == kiwi::WriteStatus::ok);

  // Alertmanager lists it as active, with the labels and annotations the agent gave it.
  rapidjson::Document listed;
  REQUIRE(eventually([&] {
    listed = am.api("/api/v2/alerts");
    return listed.IsArray() && listed.Size() == 1;
  }));
  CHECK(strings(listed[0]["labels"]) == kHotLabels);
  CHECK(strings(listed[0]["annotations"]) ==
        std::map<std::string, std::string>{
            {"summary", "soc at 85.2 °C"}, {"threshold", "80"}, {"value", "85.2"}});
  CHECK(std::string(listed[0]["status"]["state"].GetString()) == "active");
  CHECK(std::string(listed[0]["generatorURL"].GetString()) == "http://kiwipi:8095/");

  // ... and its route sends it to the webhook receiver, firing.
  REQUIRE(eventually([&] { return !webhooks(hook, "firing").empty(); }, 20s));
  const ReceivedRequest first = webhooks(hook, "firing").front();
  CHECK(first.target == "/hook");
  const auto fired = json(first.body);
  REQUIRE(fired["alerts"].Size() == 1);
  const auto& alert = fired["alerts"][0];
  CHECK(strings(alert["labels"]) == kHotLabels);
  CHECK(std::string(alert["annotations"]["value"].GetString()) == "85.2");
  CHECK(std::string(alert["endsAt"].GetString()) == "0001-01-01T00:00:00Z");

  // The webhook plugin writes what Alertmanager's webhook writes of the same alert: the same
  // labels, and the same fingerprint (Prometheus' hash of them).
  Receiver mine([](int) { return 200; });
  Notifier webhook("webhook", "url = \"" + mine.base() + "/mine\"\n");
  REQUIRE(webhook.send(notification({hot})).status == kiwi::WriteStatus::ok);
  REQUIRE(mine.requests().size() == 1);
  const auto own = json(mine.requests()[0].body);
  CHECK(strings(own["alerts"][0]["labels"]) == kHotLabels);
  CHECK(std::string(own["alerts"][0]["fingerprint"].GetString()) ==
        alert["fingerprint"].GetString());
  CHECK(std::string(own["alerts"][0]["status"].GetString()) == alert["status"].GetString());
  CHECK(std::string(own["alerts"][0]["endsAt"].GetString()) == alert["endsAt"].GetString());

  // The resolve: Alertmanager sends the resolved alert on, and lists it no more.
  const kiwi::WriteResult gone = n.send(notification({resolved(hot, now())}));
  INFO(gone.reason);
  REQUIRE(gone.status == kiwi::WriteStatus::ok);
  const bool resolve_routed = eventually([&] { return !webhooks(hook, "resolved").empty(); }, 20s);
  INFO("Alertmanager's log ends: " << am.log_tail());
  REQUIRE(resolve_routed);
  const auto done = json(webhooks(hook, "resolved").front().body);
  REQUIRE(done["alerts"].Size() == 1);
  CHECK(std::string(done["alerts"][0]["status"].GetString()) == "resolved");
  CHECK(strings(done["alerts"][0]["labels"]) == kHotLabels);
  CHECK(std::string(done["alerts"][0]["endsAt"].GetString()) != "0001-01-01T00:00:00Z");
  CHECK(eventually([&] {
    listed = am.api("/api/v2/alerts");
    return listed.IsArray() && listed.Empty();
  }));
}

TEST_CASE("webhook: Alertmanager's webhook JSON with the custom headers and basic auth") {
  TempDir dir;
  Receiver rx([](int) { return 200; });
  Notifier n("webhook", "url = \"" + rx.base() + "/kiwi\"\nheaders = { X-Org = \"pi\" }\n" +
                            "basic_auth = { username = \"kiwi\", password_file = \"" +
                            secret_file(dir, "pass", "s3cret") + "\" }\n");
  const double t0 = now();
  const kiwi::AlertNotice hot = soc_hot(t0 - 60);
  kiwi::AlertNotice failing = resolved(soc_hot(t0 - 120), t0 - 5);
  failing.name = "sensor_failing";
  failing.labels = {};
  failing.sensor = "storage";
  const kiwi::WriteResult r = n.send(notification({hot, failing}));
  INFO(r.reason);
  REQUIRE(r.status == kiwi::WriteStatus::ok);
  REQUIRE(rx.requests().size() == 1);
  const ReceivedRequest req = rx.requests()[0];
  CHECK(req.method == "POST");
  CHECK(req.target == "/kiwi");
  CHECK(req.header("content-type") == "application/json");
  CHECK(req.header("user-agent") == "kiwi-agent/0.3.0");
  CHECK(req.header("x-org") == "pi");
  CHECK(req.header("authorization") == "Basic a2l3aTpzM2NyZXQ=");  // base64("kiwi:s3cret")
  const auto d = json(req.body);
  CHECK(std::string(d["version"].GetString()) == "4");
  CHECK(std::string(d["status"].GetString()) == "firing");
  CHECK(std::string(d["receiver"].GetString()) == "n-webhook");
  CHECK(std::string(d["groupKey"].GetString()) == "{}/{instance=\"kiwipi\"}:{}");
  CHECK(std::string(d["externalURL"].GetString()) == "http://kiwipi:8095/");
  CHECK(d["truncatedAlerts"].GetInt() == 0);
  CHECK(d["groupLabels"].ObjectEmpty());
  CHECK(strings(d["commonLabels"]) ==
        std::map<std::string, std::string>{{"instance", "kiwipi"}, {"severity", "warning"}});
  REQUIRE(d["alerts"].Size() == 2);
  CHECK(std::string(d["alerts"][0]["status"].GetString()) == "firing");
  CHECK(strings(d["alerts"][0]["labels"]) == kHotLabels);
  CHECK(std::string(d["alerts"][0]["endsAt"].GetString()) == "0001-01-01T00:00:00Z");
  CHECK(std::string(d["alerts"][1]["status"].GetString()) == "resolved");
  CHECK(strings(d["alerts"][1]["annotations"]) ==
        std::map<std::string, std::string>{
            {"summary", "soc at 85.2 °C"}, {"threshold", "80"}, {"value", "71.5"}});
  CHECK(std::string(d["alerts"][1]["endsAt"].GetString()) != "0001-01-01T00:00:00Z");
  CHECK(std::string(d["alerts"][1]["fingerprint"].GetString()).size() == 16);
}

TEST_CASE("ntfy: one plain-text message per alert with Title, Priority, Tags and the token") {
  TempDir dir;
  Receiver rx([](int) { return 200; });
  Notifier n("ntfy", "url = \"" + rx.base() + "/kiwi-alerts\"\ntoken_file = \"" +
                         secret_file(dir, "token", "tk_s3cret") + "\"\n");
  const kiwi::AlertNotice hot = soc_hot(now() - 60);
  const kiwi::WriteResult r = n.send(notification({hot, resolved(hot, now())}));
  INFO(r.reason);
  REQUIRE(r.status == kiwi::WriteStatus::ok);
  const auto got = rx.requests();
  REQUIRE(got.size() == 2);
  CHECK(got[0].method == "POST");
  CHECK(got[0].target == "/kiwi-alerts");
  CHECK(got[0].header("title") == "[FIRING] soc_hot on kiwipi");
  CHECK(got[0].header("priority") == "4");
  CHECK(got[0].header("tags") == "rotating_light,warning");
  CHECK(got[0].header("click") == "http://kiwipi:8095/");
  CHECK(got[0].header("authorization") == "Bearer tk_s3cret");
  CHECK(got[0].header("content-type") == "text/plain; charset=utf-8");
  CHECK(got[0].body ==
        "soc at 85.2 °C\nvalue 85.2 (threshold 80)\nlabels: sensor=thermal, zone=soc");
  CHECK(got[1].header("title") == "[RESOLVED] soc_hot on kiwipi");
  CHECK(got[1].header("priority") == "2");
  CHECK(got[1].header("tags") == "white_check_mark");
  CHECK(got[1].header("authorization") == "Bearer tk_s3cret");
  CHECK_THAT(got[1].body, Catch::StartsWith("soc at 85.2 °C\nvalue 71.5 (threshold 80)\n"));
}

TEST_CASE("ntfy: after a failure in the middle, a retry sends only the alerts not yet sent") {
  Receiver rx([](int n) { return n == 1 ? 503 : 200; });
  Notifier n("ntfy", "url = \"" + rx.base() + "/t\"\n");
  const kiwi::AlertNotice hot = soc_hot(now() - 60);
  kiwi::AlertNotice other = soc_hot(now() - 30);
  other.labels = {{"zone", "gpu"}};
  const kiwi::Notification both = notification({hot, other});
  const kiwi::WriteResult first = n.send(both);
  CHECK(first.status == kiwi::WriteStatus::retry);
  CHECK(first.reason ==
        "HTTP 503: test receiver says 503 (1 of its 2 alerts sent before; not "
        "sent again)");
  CHECK(n.send(both).status == kiwi::WriteStatus::ok);
  const auto got = rx.requests();
  REQUIRE(got.size() == 3);
  CHECK_THAT(got[0].body, Catch::EndsWith("zone=soc"));
  CHECK_THAT(got[1].body, Catch::EndsWith("zone=gpu"));
  CHECK_THAT(got[2].body, Catch::EndsWith("zone=gpu"));
  // A notification sent whole is not remembered: the same one again goes again.
  CHECK(n.send(both).status == kiwi::WriteStatus::ok);
  CHECK(rx.requests().size() == 5);
}

TEST_CASE(
    "notifiers: no connection, 503 and 429 are retried, another 4xx dropped, no secret "
    "in any reason") {
  TempDir dir;
  const std::string auth = "basic_auth = { username = \"kiwi\", password_file = \"" +
                           secret_file(dir, "pass", "s3cret") + "\" }\n";
  for (const std::string plugin : {"alertmanager", "webhook", "ntfy"}) {
    INFO(plugin);
    const kiwi::Notification one = notification({soc_hot(now())});
    {
      Notifier n(plugin,
                 "url = \"http://127.0.0.1:" + std::to_string(free_port()) + "/x\"\n" + auth);
      const kiwi::WriteResult r = n.send(one);
      CHECK(r.status == kiwi::WriteStatus::retry);
      CHECK_THAT(r.reason, Catch::Contains("Couldn't connect to server"));
      CHECK_THAT(r.reason, !Catch::Contains("s3cret"));
    }
    for (auto [status, verdict] :
         {std::pair{503, kiwi::WriteStatus::retry}, std::pair{429, kiwi::WriteStatus::retry},
          std::pair{400, kiwi::WriteStatus::drop}, std::pair{401, kiwi::WriteStatus::drop}}) {
      INFO(status);
      Receiver rx([status = status](int) { return status; });
      Notifier n(plugin, "url = \"" + rx.base() + "/x\"\n" + auth);
      const kiwi::WriteResult r = n.send(one);
      CHECK(r.status == verdict);
      CHECK_THAT(r.reason, Catch::Contains("HTTP " + std::to_string(status) +
                                           ": test receiver says " + std::to_string(status)));
      CHECK_THAT(r.reason, !Catch::Contains("s3cret"));
      CHECK(rx.requests().size() == 1);
    }
  }
}

TEST_CASE("notifiers: a receiver that never answers is a retry once the timeout is up", "[slow]") {
  for (const std::string plugin : {"alertmanager", "webhook", "ntfy"}) {
    INFO(plugin);
    Receiver rx([](int) { return 0; });
    Notifier n(plugin, "url = \"" + rx.base() + "/x\"\ntimeout = \"1s\"\n");
    const auto t0 = std::chrono::steady_clock::now();
    const kiwi::WriteResult r = n.send(notification({soc_hot(now())}));
    const auto took = std::chrono::steady_clock::now() - t0;
    CHECK(r.status == kiwi::WriteStatus::retry);
    CHECK_THAT(r.reason, Catch::Contains("Timeout was reached"));
    // It gave up at its timeout, not before, and did not hang on.
    CHECK(took >= 900ms);
    CHECK(took < 10s);
  }
}
