// MQTT with Home Assistant discovery, from the real agent to a real broker (Debian's mosquitto,
// started on loopback with its own config), read with mosquitto_sub as Home Assistant would read
// it: the retained discovery configs and their device, the states, availability and the last
// will, a broker restart, a wrong password. The agent samples the rpi4 fixture board, so the
// values are the ones its README works out.
#include <rapidjson/document.h>

#include <catch2/catch.hpp>

#include "checks.hpp"
#include "harness.hpp"
#include "mosquitto.hpp"
#include "prometheus.hpp"

using namespace kiwi_test;
using namespace std::chrono_literals;

namespace {

const std::string kBoard = KIWI_FIXTURES_DIR "/rpi4";
const std::string kThermal = "thermal_celsius_cpu-thermal";
const std::string kMemory = "memory_used_ratio";
const std::string kConfig = "homeassistant/sensor/kiwipi/";
const std::string kState = "kiwi/kiwipi/";

// The agent on the rpi4 board, publishing every second to `broker` as node "kiwipi".
AgentOptions on_rpi4(const Mosquitto& broker, const std::string& more = "") {
  AgentOptions o;
  o.agent_lines = "procfs = \"" + kBoard + "/proc\"\nsysfs = \"" + kBoard + "/sys\"\n";
  o.toml = "[[mqtt]]\nurl = \"" + broker.url() + "\"\ninterval = \"1s\"\nnode = \"kiwipi\"\n" +
           "sysfs = \"" + kBoard + "/sys\"\n" + more;
  return o;
}

// What Home Assistant would find on `broker` now: the retained discovery configs and states.
struct Retained {
  std::map<std::string, std::string> configs, states;
  // The board's thermal zone and memory announced, online, and their values there.
  bool announced() const {
    const auto online = states.find(kState + "availability");
    return configs.count(kConfig + kThermal + "/config") &&
           configs.count(kConfig + kMemory + "/config") && online != states.end() &&
           online->second == "online" && states.count(kState + kThermal + "/state") &&
           states.count(kState + kMemory + "/state");
  }
};
Retained retained(const Mosquitto& broker) {
  return {broker.retained("homeassistant/#"), broker.retained("kiwi/#")};
}

// The mqtt output's entry in /api/health (its "remote_write" list has every output).
std::string output_error(const Agent& agent) {
  auto d = get_json(agent.port(), "/api/health");
  if (!d.HasMember("remote_write") || d["remote_write"].Empty()) return "";
  return d["remote_write"][0]["last_error"].GetString();
}

// The memory ratio: (MemTotal - MemAvailable) / MemTotal, in
// percent, from the board's meminfo (3882784 kB, 3312668 kB).
constexpr double kMemoryPercent = (3882784.0 - 3312668.0) / 3882784.0 * 100;  // 14.6832...

}  // namespace

TEST_CASE(
    "mqtt: Home Assistant finds the board as a device with retained sensor configs, online and "
    "values, announced again on its birth message, and kill -9 leaves the last will offline",
    "[slow]") {
  Mosquitto broker;
  Agent agent(on_rpi4(broker));
  INFO(agent.stderr_text());
  Retained found;
  REQUIRE(eventually([&] { return (found = retained(broker)).announced(); }, 30s));
  auto& [configs, states] = found;
  INFO(broker.log());
  // Every config: valid JSON with what Home Assistant needs, and its state there, retained.
  for (const auto& [topic, payload] : configs) {
    INFO(topic << " " << payload);
    CHECK(topic.starts_with(kConfig));
    CHECK(topic.ends_with("/config"));
    const auto d = parse_json(payload);
    for (const char* key :
         {"name", "unique_id", "object_id", "state_topic", "availability_topic", "state_class"})
      CHECK(d.HasMember(key));
    const std::string object = topic.substr(kConfig.size(), topic.size() - kConfig.size() - 7);
    CHECK(d["unique_id"].GetString() == "kiwi_kiwipi_" + object);
    CHECK(d["object_id"].GetString() == "kiwipi_" + object);
    CHECK(d["state_topic"].GetString() == kState + object + "/state");
    CHECK(d["availability_topic"].GetString() == kState + "availability");
    CHECK(d["state_class"].GetString() == std::string("measurement"));
    CHECK(states.count(kState + object + "/state") == 1);
    const auto& device = d["device"];
    CHECK(device["identifiers"][0].GetString() == std::string("kiwi_kiwipi"));
    CHECK(device["name"].GetString() == std::string("kiwipi"));
    CHECK(device["model"].GetString() == std::string("Raspberry Pi 4 Model B Rev 1.4"));
    CHECK(device["manufacturer"].GetString() == std::string("Raspberry Pi Ltd"));
    CHECK(device["sw_version"].GetStringLength() > 0);
  }
  const auto thermal = parse_json(configs[kConfig + kThermal + "/config"]);
  CHECK(thermal["name"].GetString() == std::string("Temperature cpu-thermal"));
  CHECK(thermal["unit_of_measurement"].GetString() == std::string("°C"));
  CHECK(thermal["device_class"].GetString() == std::string("temperature"));
  const auto memory = parse_json(configs[kConfig + kMemory + "/config"]);
  CHECK(memory["unit_of_measurement"].GetString() == std::string("%"));
  CHECK_FALSE(memory.HasMember("device_class"));
  // The board's readings: 47722 m°C; memory as percent.
  CHECK(states[kState + kThermal + "/state"] == "47.722");
  CHECK(std::stod(states[kState + kMemory + "/state"]) == Approx(kMemoryPercent).margin(1e-6));
  CHECK(states[kState + "availability"] == "online");
  // Only the default series (the dashboard cards' gauges), not every series of the board.
  for (const auto& [topic, payload] : configs) {
    INFO(topic);
    const bool one_of_them = topic.find("/cpu_usage_ratio/") != std::string::npos ||
                             topic.find("/thermal_celsius_") != std::string::npos ||
                             topic.find("/memory_used_ratio/") != std::string::npos ||
                             topic.find("/storage_used_ratio_") != std::string::npos ||
                             topic.find("/power_under_voltage_alarm/") != std::string::npos;
    CHECK(one_of_them);
  }

  // Home Assistant restarted (its birth message): everything is announced again, here a config
  // that someone cleared.
  const std::string cleared = kConfig + kThermal + "/config";
  broker.publish(cleared, "", true);
  REQUIRE(eventually([&] { return broker.retained(cleared).empty(); }));
  broker.publish("homeassistant/status", "online", false);
  CHECK(eventually([&] { return broker.retained(cleared).count(cleared) == 1; }));

  // Killed: no goodbye from the agent; the broker publishes its last will.
  CHECK(agent.stop(SIGKILL) == 128 + SIGKILL);
  CHECK(eventually(
      [&] {
        return broker.retained(kState + "availability")[kState + "availability"] == "offline";
      },
      20s));
}

TEST_CASE(
    "mqtt: after the broker restarts empty the agent reconnects and the configs, online and "
    "current values are there again, and SIGTERM says offline",
    "[slow]") {
  Mosquitto broker;
  Agent agent(on_rpi4(broker));
  INFO(agent.stderr_text());
  REQUIRE(eventually([&] { return broker.retained("kiwi/#").count(kState + kThermal + "/state"); },
                     30s));
  const int port = broker.port;
  broker.stop();
  // While it is down the agent samples and serves, and /api/health says why nothing is sent.
  CHECK(eventually(
      [&] { return output_error(agent).starts_with("not connected to " + broker.url()); }, 20s));
  CHECK(get_json(agent.port(), "/api/current").HasMember("sensors"));
  broker.start();  // no persistence: it knows nothing of before
  REQUIRE(broker.port == port);
  // The reconnect's backoff is 1 s, 4 s, 9 s, 16 s ...: a few seconds down, the next try comes
  // within 25 s.
  Retained found;
  REQUIRE(eventually([&] { return (found = retained(broker)).announced(); }, 60s));
  CHECK(found.states[kState + kThermal + "/state"] == "47.722");
  CHECK_THAT(agent.stderr_text(), Catch::Contains("connection lost"));
  CHECK_THAT(agent.stderr_text(), Catch::Contains("reconnecting with backoff"));

  // Stopped: "offline" (retained) before a clean disconnect.
  CHECK(agent.stop(SIGTERM) == 0);
  CHECK(broker.retained(kState + "availability")[kState + "availability"] == "offline");
}

TEST_CASE(
    "mqtt: a wrong password is logged as the broker's refusal, the agent runs on and retries, and "
    "a fixed password file and a reload connect it",
    "[slow]") {
  Mosquitto broker("kiwi", "right-password");
  TempDir tmp;
  const auto pass = tmp.path / "mqtt.pass";
  write_text(pass, "wrong-password\n");
  Agent agent(on_rpi4(broker, "username = \"kiwi\"\npassword_file = \"" + pass.string() + "\"\n"));
  REQUIRE(eventually(
      [&] {
        return agent.stderr_text().find("the broker refused the connection") != std::string::npos;
      },
      20s));
  const std::string log = agent.stderr_text();
  INFO(log);
  CHECK_THAT(log, Catch::Contains("warn: mqtt mqtt: cannot publish to " + broker.url() +
                                  ": the broker refused the connection: Connection Refused: not "
                                  "authorised. (check username and password_file)"));
  // Running and serving; nothing published.
  CHECK(get_json(agent.port(), "/api/health").HasMember("status"));
  CHECK(broker.retained("#").empty());
  // Logged once, not once per try of the backoff.
  const auto count = [](const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  CHECK(count(log, "warn: mqtt mqtt: cannot publish to") == 1);
  // ... though it tries again, with backoff (1 s, then 4 s).
  CHECK(eventually([&] { return count(broker.log(), "disconnected, not authorised") >= 2; }, 15s));

  write_text(pass, "right-password\n");
  CHECK_THAT(agent.reload(), Catch::StartsWith("info: reloaded"));
  CHECK(eventually(
      [&] { return broker.retained(kState + "availability")[kState + "availability"] == "online"; },
      20s));
}
