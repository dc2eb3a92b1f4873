// The built-in alert rules (config/kiwi-agent.toml, docs/alerts.md) on the real binary: the agent
// runs on a scratch copy of the Raspberry Pi 4 fixture (tests/fixtures/rpi4) whose files the test
// rewrites as the board would change them: the SoC past its trip, the firmware's under-voltage and
// throttling bits, memory running out, an OOM kill, a filesystem filling up until the history
// cannot commit. Each rule must fire and resolve again, as /metrics (kiwi_alert_firing) and the
// log ("alert firing: ...", "alert resolved: ...") show it; a temperature hovering at the
// threshold must not flap; a restart must keep a firing alert firing, with its start, unannounced.
//
// Ticks are 200 ms, not 1 s. The built-in rules whose `for` or `keep_firing_for` is a minute or
// more (soc_hot 30 s, filesystem_full, memory_low, sensor_failing 1 m, oom_kill 5 m,
// history_write_failing 1 m)
// would make each case minutes long: the test's config replaces them (a user rule of a built-in
// rule's name replaces it) by copies with the same metric, labels, threshold and hysteresis and a
// shorter `for` / `keep_firing_for` (kShortened). The thresholds are the built-in ones.
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <regex>

#include "alertmanager.hpp"
#include "checks.hpp"
#include "receiver.hpp"

using namespace kiwi_test;
using namespace std::chrono_literals;

namespace {

const fs::path kBoard = fs::path(KIWI_FIXTURES_DIR) / "rpi4";
const char* const kThrottled = "sys/devices/platform/soc/soc:firmware/get_throttled";
const char* const kTemp = "sys/class/thermal/thermal_zone0/temp";  // cpu-thermal, trip 110 °C

// The built-in rules of config/kiwi-agent.toml with the same thresholds, shorter waits.
const char* const kShortened = R"toml(
[[alert]]
name = "soc_hot"
metric = "thermal_celsius"
above = 80.0
threshold_series = "thermal_critical_celsius"
threshold_offset = -5.0
for = "1s"
hysteresis = 3.0
severity = "critical"
summary = "{{labels.sensor}} at {{value}} °C (limit {{threshold}} °C)"

[[alert]]
name = "filesystem_full"
metric = "storage_used_ratio"
above = 0.9
for = "1s"
hysteresis = 0.02
severity = "warning"
summary = "{{labels.mount}} is {{value_percent}} % full"

[[alert]]
name = "memory_low"
metric = "memory_used_ratio"
above = 0.95
for = "1s"
hysteresis = 0.01
severity = "warning"
summary = "memory {{value_percent}} % used: less than 5 % available"

[[alert]]
name = "oom_kill"
metric = "vm_oom_kills_total"
rate = true
above = 0.0
keep_firing_for = "1s"
severity = "warning"
summary = "the kernel killed a process for lack of memory (OOM) in the last 5 minutes"

[[alert]]
name = "sensor_failing"
status = "failing"
for = "1s"
severity = "warning"
summary = "sensor {{sensor}} has failed for a minute: {{message}}"

[[alert]]
name = "history_write_failing"
metric = "store_write_errors_total"
sensor = "agent"
rate = true
above = 0.0
keep_firing_for = "1s"
severity = "critical"
summary = "the history cannot be written (see /api/health); samples wait in memory"
)toml";

// Rewrites a file of the board in place (same inode: the sensors keep some files open and
// pread them): the new text over the old, then cut to its length, so a reader never finds it
// empty.
void rewrite(const fs::path& file, const std::string& text) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  const bool ok = ::pwrite(fd, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size()) &&
                  ::ftruncate(fd, static_cast<off_t>(text.size())) == 0;
  ::close(fd);
  REQUIRE(ok);
}

// How many times `line` is in `text`.
std::size_t count(const std::string& text, const std::string& line) {
  std::size_t n = 0;
  for (auto at = text.find(line); at != std::string::npos; at = text.find(line, at + 1)) ++n;
  return n;
}

// The agent on a scratch copy of the Raspberry Pi 4 board: thermal, power, memory and pressure
// (vm_oom_kills_total) at 200 ms, commits every 200 ms, the built-in rules with kShortened's.
// `more` is appended to the config (a storage sensor); `data_dir` replaces the temporary one.
class Board {
 public:
  explicit Board(const std::string& more = "", const fs::path& data_dir = {},
                 std::function<void(const fs::path&)> prepare = {}) {
    fs::copy(kBoard, tree(), fs::copy_options::recursive);
    if (prepare) prepare(tree());
    AgentOptions o;
    o.agent_lines = "procfs = \"" + (tree() / "proc").string() + "\"\nsysfs = \"" +
                    (tree() / "sys").string() + "\"\n";
    o.collector_lines = "interval = \"200ms\"\ncommit_interval = \"200ms\"\n";
    o.toml = std::string(
                 "[[sensor]]\nplugin = \"thermal\"\n[[sensor]]\nplugin = \"power\"\n"
                 "[[sensor]]\nplugin = \"memory\"\n[[sensor]]\nplugin = \"pressure\"\n") +
             more + kShortened;
    o.data_dir = data_dir;
    agent.emplace(std::move(o));
    client.emplace(agent->port());
  }

  fs::path tree() const { return scratch.path / "board"; }
  fs::path file(const char* relative) const { return tree() / relative; }

  std::string metrics() { return client->get("/metrics").body; }
  std::string log() const { return agent->stderr_text(); }

  // The kiwi_alert_firing lines of `name` in one /metrics body.
  static std::size_t firing_in(const std::string& metrics, const std::string& name) {
    return count(metrics, "\nkiwi_alert_firing{alertname=\"" + name + "\",");
  }
  bool firing(const std::string& name) { return firing_in(metrics(), name) > 0; }

  // Waits for a /metrics where `name` fires, then for the log's line; or, resolved, where it does
  // not fire and the log's line.
  void expect_firing(const std::string& name, std::chrono::milliseconds timeout = 15s) {
    INFO("waiting for " << name << " to fire; the log:\n" << log());
    REQUIRE(eventually([&] { return firing(name); }, timeout));
    REQUIRE(eventually([&] { return count(log(), "alert firing: " + name + " (") > 0; }, 5s));
  }
  void expect_resolved(const std::string& name, std::chrono::milliseconds timeout = 15s) {
    INFO("waiting for " << name << " to resolve; the log:\n" << log());
    REQUIRE(eventually([&] { return !firing(name); }, timeout));
    REQUIRE(eventually([&] { return count(log(), "alert resolved: " + name + " (") > 0; }, 5s));
  }

  // Waits for a /metrics body in which `series` (a whole series, e.g.
  // `kiwi_thermal_celsius{sensor="cpu-thermal"}`) has the value `value`, and returns it.
  std::string metrics_with(const std::string& series, const std::string& value) {
    std::string body;
    const bool seen = eventually(
        [&] {
          body = metrics();
          return body.find("\n" + series + " " + value + "\n") != std::string::npos;
        },
        10s);
    INFO("the last /metrics:\n" << body);
    REQUIRE(seen);
    return body;
  }

  TempDir scratch;
  std::optional<Agent> agent;
  std::optional<HttpClient> client;
};

// A firing instance's `since` and `active_at` as the store kept them (table alert_state), read
// from the file of a stopped agent.
std::pair<std::string, std::string> kept_start(const fs::path& db, const std::string& name) {
  const std::string row =
      sqlite_value(db, ("SELECT data FROM alert_state WHERE data LIKE '1' || char(31) || '" + name +
                        "' || char(31) || '%'")
                           .c_str());
  std::vector<std::string> fields;
  std::size_t from = 0;
  for (auto at = row.find('\x1f'); at != std::string::npos; at = row.find('\x1f', from)) {
    fields.push_back(row.substr(from, at - from));
    from = at + 1;
  }
  // version, name, labels, sensor, series, state, severity, summary, value, threshold, since,
  // active_at (store/alert_log.cpp).
  INFO("alert_state row of " << name << ": " << row);
  REQUIRE(fields.size() == 12);
  CHECK(fields[5] == "2");  // AlertState::firing
  return {fields[10], fields[11]};
}

}  // namespace

TEST_CASE("alerts: the SoC past its trip fires soc_hot, and it resolves once the SoC cools") {
  Board b;
  const std::string temp = "kiwi_thermal_celsius{sensor=\"cpu-thermal\"}";
  b.metrics_with(temp, "47.722");
  CHECK_FALSE(b.firing("soc_hot"));
  // The zone's critical trip is 110 °C: the rule's limit is 5 °C below it, not 80 °C.
  rewrite(b.file(kTemp), "90000\n");
  b.metrics_with(temp, "90");
  CHECK_FALSE(b.firing("soc_hot"));
  rewrite(b.file(kTemp), "106000\n");
  b.expect_firing("soc_hot");
  CHECK_THAT(b.log(), Catch::Contains("alert firing: soc_hot (thermal_celsius{sensor=\"cpu-"
                                      "thermal\"}): cpu-thermal at 106 °C (limit 105 °C)"));
  rewrite(b.file(kTemp), "47722\n");
  b.expect_resolved("soc_hot");
  CHECK(b.agent->stop() == 0);
}

TEST_CASE(
    "alerts: a temperature hovering at the limit (±0.3 °C for 20 ticks) fires once and does "
    "not flap") {
  Board b;
  const std::string temp = "kiwi_thermal_celsius{sensor=\"cpu-thermal\"}";
  rewrite(b.file(kTemp), "105300\n");
  b.expect_firing("soc_hot");
  // Each value read by a tick (seen in /metrics), the alert firing in that same body.
  for (int tick = 0; tick < 20; ++tick) {
    const bool below = tick % 2 == 0;
    rewrite(b.file(kTemp), below ? "104700\n" : "105300\n");
    const std::string body = b.metrics_with(temp, below ? "104.7" : "105.3");
    INFO("tick " << tick);
    CHECK(Board::firing_in(body, "soc_hot") == 1);
  }
  CHECK(count(b.log(), "alert firing: soc_hot (") == 1);
  CHECK(count(b.log(), "alert resolved: soc_hot (") == 0);
  // 102 °C is the limit less the 3 °C hysteresis: at it, the alert resolves.
  rewrite(b.file(kTemp), "102000\n");
  b.expect_resolved("soc_hot");
  CHECK(count(b.log(), "alert firing: soc_hot (") == 1);
  CHECK(count(b.log(), "alert resolved: soc_hot (") == 1);
  CHECK(b.agent->stop() == 0);
}

TEST_CASE(
    "alerts: the firmware's under-voltage and throttled-now bits fire under_voltage and "
    "throttled, and clearing them resolves both") {
  Board b;
  // The fixture's 0x50000: under-voltage and throttling since boot, not now (plugins/power).
  b.metrics_with("kiwi_power_throttle_flag{flag=\"under_voltage\",when=\"since_boot\"}", "1");
  CHECK_FALSE(b.firing("under_voltage"));
  CHECK_FALSE(b.firing("throttled"));
  rewrite(b.file(kThrottled), "50001\n");  // bit 0: under-voltage now
  b.expect_firing("under_voltage");
  CHECK_FALSE(b.firing("throttled"));
  rewrite(b.file(kThrottled), "50005\n");  // bit 2: throttled now, too
  b.expect_firing("throttled");
  CHECK(b.firing("under_voltage"));
  CHECK_THAT(b.metrics(), Catch::Contains("kiwi_alert_firing{alertname=\"under_voltage\","
                                          "severity=\"critical\",flag=\"under_voltage\","
                                          "when=\"now\"} 1"));
  rewrite(b.file(kThrottled), "50000\n");
  b.expect_resolved("under_voltage");
  b.expect_resolved("throttled");
  CHECK(count(b.log(), "alert firing: under_voltage (") == 1);
  CHECK(b.agent->stop() == 0);
}

TEST_CASE("alerts: MemAvailable under 5 % fires memory_low, and back up, it resolves") {
  Board b;
  const fs::path meminfo = b.file("proc/meminfo");
  const std::string normal = read_text(meminfo);
  // MemTotal 3882784 kB: 77655 kB available is 2 %, 98 % used (the rule: above 95 %).
  const std::string low = std::regex_replace(normal, std::regex("MemAvailable: +[0-9]+ kB"),
                                             "MemAvailable:      77655 kB");
  REQUIRE(low != normal);
  rewrite(meminfo, low);
  b.expect_firing("memory_low");
  CHECK_THAT(b.log(), Catch::Contains("memory 98.0 % used"));
  rewrite(meminfo, normal);
  b.expect_resolved("memory_low");
  CHECK(b.agent->stop() == 0);
}

TEST_CASE(
    "alerts: an OOM kill (vmstat oom_kill grows) fires oom_kill, which resolves once it "
    "stops growing for keep_firing_for") {
  Board b;
  const fs::path vmstat = b.file("proc/vmstat");
  const std::string before = read_text(vmstat);
  REQUIRE(before.find("\noom_kill 1\n") != std::string::npos);
  b.metrics_with("kiwi_vm_oom_kills_total", "1");
  CHECK_FALSE(b.firing("oom_kill"));
  rewrite(vmstat, std::regex_replace(before, std::regex("\noom_kill 1\n"), "\noom_kill 2\n"));
  b.expect_firing("oom_kill");
  b.expect_resolved("oom_kill");  // the counter no longer grows
  CHECK(count(b.log(), "alert firing: oom_kill (") == 1);
  CHECK(b.agent->stop() == 0);
}

TEST_CASE(
    "alerts: a sensor failing fires sensor_failing with its message, and it resolves once "
    "the sensor reads again") {
  Board b;
  const fs::path meminfo = b.file("proc/meminfo");
  const std::string good = read_text(meminfo);
  CHECK_FALSE(b.firing("sensor_failing"));
  rewrite(meminfo, "this is not a meminfo\n");
  b.expect_firing("sensor_failing");
  CHECK(count(b.metrics(),
              "kiwi_alert_firing{alertname=\"sensor_failing\",severity=\"warning\",sensor="
              "\"memory\"} 1") == 1);
  CHECK_THAT(b.client->get("/api/alerts").body, Catch::Contains("sensor memory has failed"));
  rewrite(meminfo, good);
  b.expect_resolved("sensor_failing");
}

TEST_CASE(
    "alerts: a restart while an alert fires keeps it firing with its start, and does not "
    "announce it again") {
  Board b;
  rewrite(b.file(kThrottled), "50001\n");
  b.expect_firing("under_voltage");
  CHECK(b.agent->stop() == 0);
  const auto [since, active_at] = kept_start(b.agent->db_path(), "under_voltage");
  b.agent->start(Ready::first_sample);
  b.client.emplace(b.agent->port());
  // Still firing after some ticks of the new run (its first sample restores it).
  const auto seq = sequence_of(*b.client);
  REQUIRE(eventually([&] { return sequence_of(*b.client) > seq + 3; }));
  CHECK(b.firing("under_voltage"));
  CHECK(count(b.log(), "alert firing: under_voltage") == 0);  // the new run's log
  CHECK(b.agent->stop() == 0);
  CHECK(kept_start(b.agent->db_path(), "under_voltage") == std::pair{since, active_at});
  // And it still resolves when the bit clears.
  b.agent->start(Ready::first_sample);
  b.client.emplace(b.agent->port());
  rewrite(b.file(kThrottled), "50000\n");
  b.expect_resolved("under_voltage");
  CHECK(count(b.log(), "alert firing: under_voltage") == 0);
  CHECK(b.agent->stop() == 0);
}

TEST_CASE(
    "alerts: a data_dir filling up fires filesystem_full past 90 %, history_write_failing "
    "once commits fail, and freed, both resolve") {
  TempDir tmp;
  // The data_dir on a tmpfs of its own, watched by a storage sensor through a mount line added to
  // the board's mountinfo (statvfs under rootfs: tmp/rootfs/tiny). Needs root: without, fail.
  TinyFilesystem tiny(tmp.path / "rootfs/tiny", "2m");
  REQUIRE(tiny.mounted());  // a test that cannot mount must not pass
  const std::string storage = "[[sensor]]\nplugin = \"storage\"\n[sensor.options]\nrootfs = \"" +
                              (tmp.path / "rootfs").string() +
                              "\"\ninclude_mounts = [\"/tiny\"]\ninclude_types = [\"tmpfs\"]\n"
                              "exclude_types = []\n";
  Board b(storage, tiny.path() / "data", [](const fs::path& tree) {
    std::ofstream(tree / "proc/self/mountinfo", std::ios::app)
        << "99 21 0:99 / /tiny rw,relatime shared:99 - tmpfs tmpfs rw,size=2048k\n";
  });
  const std::string ratio = "kiwi_storage_used_ratio{mount=\"/tiny\"} ";
  auto used_ratio = [&] {
    struct statvfs s {};
    REQUIRE(::statvfs(tiny.path().c_str(), &s) == 0);
    return 1.0 - static_cast<double>(s.f_bavail) / static_cast<double>(s.f_blocks);
  };
  REQUIRE(eventually([&] { return b.metrics().find("\n" + ratio) != std::string::npos; }));
  REQUIRE(used_ratio() < 0.85);
  CHECK_FALSE(b.firing("filesystem_full"));
  // To about 93 %: past the threshold, not full.
  {
    struct statvfs s {};
    REQUIRE(::statvfs(tiny.path().c_str(), &s) == 0);
    const double target = 0.93 * static_cast<double>(s.f_blocks) * static_cast<double>(s.f_frsize);
    const double used =
        static_cast<double>(s.f_blocks - s.f_bavail) * static_cast<double>(s.f_frsize);
    std::ofstream(tiny.path() / "filler", std::ios::binary)
        << std::string(static_cast<std::size_t>(target - used), 'x');
  }
  b.expect_firing("filesystem_full");
  CHECK_FALSE(b.firing("history_write_failing"));
  CHECK_THAT(b.log(), Catch::Contains("alert firing: filesystem_full (storage_used_ratio{mount=\"/"
                                      "tiny\"}): /tiny is 9"));
  // Full: the history's commits fail (store_write_errors_total grows).
  {
    std::ofstream more(tiny.path() / "filler", std::ios::binary | std::ios::app);
    const std::string block(4096, 'x');
    for (int i = 0; i < 1024 && more; ++i) more << block << std::flush;
  }
  REQUIRE(used_ratio() > 0.99);
  b.expect_firing("history_write_failing", 30s);
  // Freed: commits go through again, the errors stop growing, the ratio falls under 88 %.
  fs::remove(tiny.path() / "filler");
  b.expect_resolved("filesystem_full");
  b.expect_resolved("history_write_failing", 30s);
  CHECK(count(b.log(), "alert firing: history_write_failing (") == 1);
  CHECK(b.agent->stop() == 0);
}

// ---- Notifications, end to end: rules on the board, [[notify]] entries, real receivers ----------

namespace {

// The requests `r` took whose body holds all of `parts`.
std::size_t received(const Receiver& r, std::initializer_list<std::string> parts) {
  std::size_t n = 0;
  for (auto& req : r.requests()) {
    bool all = true;
    for (auto& p : parts) all &= req.body.find(p) != std::string::npos;
    n += all;
  }
  return n;
}

// The agent's notifier `name` as /api/health shows it.
std::string notifier_state(HttpClient& c, const std::string& name) {
  auto d = parse_json(c.get("/api/health").body);
  if (!d.HasMember("notifiers")) return "";
  for (auto& n : d["notifiers"].GetArray())
    if (n["name"].GetString() == name) return n["state"].GetString();
  return "";
}

}  // namespace

TEST_CASE("notify: a restart keeps what fires and sends nothing twice, to a webhook and to ntfy") {
  Receiver hook([](int) { return 200; }), phone([](int) { return 200; });
  Board b("[[notify]]\nkind = \"webhook\"\nurl = \"" + hook.base() +
          "/hook\"\n[[notify]]\nkind = \"ntfy\"\nurl = \"" + phone.base() +
          "/barn\"\nmin_severity = \"critical\"\n");
  rewrite(b.file(kThrottled), "50005\n");  // under-voltage (critical) and throttled (warning)
  b.expect_firing("under_voltage");
  b.expect_firing("throttled");
  REQUIRE(eventually([&] {
    return received(hook, {"\"alertname\":\"under_voltage\"", "\"status\":\"firing\""}) == 1 &&
           received(hook, {"\"alertname\":\"throttled\""}) == 1;
  }));
  // ntfy: the critical one only, with its headers.
  REQUIRE(eventually([&] { return phone.requests().size() == 1; }));
  const auto push = phone.requests()[0];
  CHECK(push.target == "/barn");
  CHECK_THAT(push.header("title"), Catch::StartsWith("[FIRING] under_voltage on "));
  CHECK(push.header("priority") == "5");
  CHECK_THAT(push.body, Catch::Contains("under-voltage"));

  CHECK(b.agent->stop() == 0);
  b.agent->start(Ready::first_sample);
  b.client.emplace(b.agent->port());
  const auto seq = sequence_of(*b.client);
  REQUIRE(eventually([&] { return sequence_of(*b.client) > seq + 10; }));  // 2 s of ticks
  CHECK(b.firing("under_voltage"));
  CHECK(received(hook, {"\"alertname\":\"under_voltage\""}) == 1);  // not sent again
  CHECK(phone.requests().size() == 1);

  rewrite(b.file(kThrottled), "50000\n");
  b.expect_resolved("under_voltage");
  REQUIRE(eventually([&] {
    return received(hook, {"\"alertname\":\"under_voltage\"", "\"status\":\"resolved\""}) == 1 &&
           phone.requests().size() == 2;
  }));
  CHECK_THAT(phone.requests()[1].header("title"), Catch::StartsWith("[RESOLVED] under_voltage"));
}

TEST_CASE(
    "notify: a real Alertmanager gets each firing and resolve, and stopped for 60 s and started "
    "again, it loses nothing",
    "[slow]") {
  Receiver hook([](int) { return 200; });
  Alertmanager am(
      "route:\n  receiver: hook\n  group_by: ['alertname']\n  group_wait: 0s\n"
      "  group_interval: 1s\n  repeat_interval: 1h\n"
      "receivers:\n- name: hook\n  webhook_configs:\n  - url: '" +
      hook.base() + "/hook'\n    send_resolved: true\n");
  Board b("[[notify]]\nkind = \"alertmanager\"\nname = \"am\"\nurl = \"" + am.url() + "\"\n");
  auto listed = [&](const std::string& name) {
    auto d = am.api("/api/v2/alerts");
    if (!d.IsArray()) return false;
    for (auto& a : d.GetArray())
      if (a["labels"]["alertname"].GetString() == name) return true;
    return false;
  };
  rewrite(b.file(kThrottled), "50001\n");
  b.expect_firing("under_voltage");
  REQUIRE(eventually([&] { return listed("under_voltage"); }, 15s));
  REQUIRE(eventually(
      [&] {
        return received(hook, {"\"alertname\":\"under_voltage\"", "\"status\":\"firing\""}) >= 1;
      },
      15s));

  // Down: what happens meanwhile waits in the agent's queue, in order.
  am.process.stop(SIGTERM, std::chrono::seconds(20));
  const auto down_at = std::chrono::steady_clock::now();
  rewrite(b.file(kThrottled), "50000\n");
  b.expect_resolved("under_voltage");
  rewrite(b.file(kTemp), "108000\n");  // past 110 - 5
  b.expect_firing("soc_hot");
  REQUIRE(eventually([&] { return notifier_state(*b.client, "am") == "retrying"; }, 20s));
  auto health = parse_json(b.client->get("/api/health").body);
  CHECK(health["status"].GetString() == std::string("degraded"));
  // The outage is the point: the agent retries (1 s doubling to 30 s) throughout.
  std::this_thread::sleep_until(down_at + std::chrono::seconds(60));
  CHECK(notifier_state(*b.client, "am") == "retrying");

  am.start();
  // Both transitions reach it once it is back (the backoff is at most 30 s).
  REQUIRE(eventually([&] { return listed("soc_hot"); }, 45s));
  REQUIRE(eventually(
      [&] {
        return received(hook, {"\"alertname\":\"soc_hot\"", "\"status\":\"firing\""}) >= 1;
      },
      15s));
  REQUIRE(eventually(
      [&] {
        const std::string log = read_text(am.dir.path / "err");
        return log.find("under_voltage") != std::string::npos &&
               log.find("[resolved]") != std::string::npos;
      },
      15s));
  REQUIRE(eventually([&] { return notifier_state(*b.client, "am") == "idle"; }, 15s));
}
