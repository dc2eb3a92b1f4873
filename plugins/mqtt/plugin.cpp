// The mqtt output: publishes the newest reading of each series to an MQTT broker with
// libmosquitto (Debian's), announcing each as a Home Assistant sensor (discovery), with an
// availability topic and a last will. libmosquitto's own thread (mosquitto_loop_start) keeps the
// connection and reconnects with exponential backoff; write() (the output's thread) only
// publishes. Both touch the series under one mutex.
#include <mosquitto.h>
#include <mqtt_protocol.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <kiwi/io.hpp>
#include <kiwi/output.hpp>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "mqtt.hpp"

namespace {

using kiwi::OptionSpec;
using kiwi::OptionType;
using namespace std::chrono_literals;

const OptionSpec kOptions[] = {
    {"url", OptionType::string, "\"\"",
     "the broker: \"mqtt://host:1883\" or \"mqtts://host:8883\" (required)"},
    {"username", OptionType::string, "\"\"", "the login's user name; \"\" for none"},
    {"password_file", OptionType::string, "\"\"",
     "a file whose first line is the login's password (read at start and at each reload)"},
    {"ca_file", OptionType::string, "\"\"",
     "mqtts: the CA certificate (PEM) the broker's certificate is checked against; \"\" for the "
     "system's (/etc/ssl/certs)"},
    {"discovery_prefix", OptionType::string, "\"homeassistant\"",
     "Home Assistant's discovery prefix (its MQTT integration's setting)"},
    {"topic_prefix", OptionType::string, "\"kiwi\"",
     "states go to <topic_prefix>/<node>/<object>/state, availability to "
     "<topic_prefix>/<node>/availability"},
    {"node", OptionType::string, "\"\"",
     "the device's name in Home Assistant (its id: the name with other bytes than A-Z a-z 0-9 _ - "
     "as _); \"\" for the host name"},
    {"sysfs", OptionType::string, "\"/sys\"",
     "where the board's model and maker are read (device tree, DMI)"},
};

constexpr int kKeepAliveSeconds = 30;
constexpr int kQos = 1;
// How long a write() waits for the first connection (so the first batch is not skipped while
// the connection is being made), and the stop for "offline" to go out.
constexpr auto kFirstConnectWait = 5s;
constexpr auto kOfflineWait = 2s;

std::string read_password(const std::string& file) {
  const std::string text = kiwi::read_required_file(file);
  std::string line = text.substr(0, text.find('\n'));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
    line.pop_back();
  return line;
}

// Why the broker refused a CONNECT, in words a user acts on.
std::string refusal(int rc) {
  std::string why = mosquitto_connack_string(rc);
  if (rc == 4 || rc == 5 || rc == MQTT_RC_NOT_AUTHORIZED || rc == MQTT_RC_BAD_USERNAME_OR_PASSWORD)
    why += " (check username and password_file)";
  return why;
}

class Mqtt final : public kiwi::Output {
 public:
  explicit Mqtt(const kiwi::OutputContext& ctx)
      : log_(ctx.log), broker_(kiwi_mqtt::parse_url(ctx.options.get_string("url"))) {
    url_ = ctx.options.get_string("url");
    const std::string& name = ctx.options.get_string("node");
    device_.name = name.empty() ? std::string(ctx.host_name) : name;
    device_.node = kiwi_mqtt::topic_id(device_.name);
    if (device_.node.empty())
      throw std::runtime_error("node \"" + device_.name +
                               "\" has no letter or digit to make a topic level of");
    device_.sw_version = std::string(ctx.agent_version);
    device_.board = kiwi_mqtt::read_board(ctx.options.get_string("sysfs"));
    topics_.node = device_.node;
    topics_.discovery_prefix = ctx.options.get_string("discovery_prefix");
    topics_.topic_prefix = ctx.options.get_string("topic_prefix");
    for (const auto* prefix : {&topics_.discovery_prefix, &topics_.topic_prefix})
      if (prefix->empty() || prefix->find_first_of("+#") != std::string::npos)
        throw std::runtime_error(
            "discovery_prefix and topic_prefix must be non-empty topics "
            "without + or #");
    username_ = ctx.options.get_string("username");
    if (const std::string& file = ctx.options.get_string("password_file"); !file.empty()) {
      if (username_.empty()) throw std::runtime_error("password_file without username");
      password_ = read_password(file);
    }
    ca_file_ = ctx.options.get_string("ca_file");
    if (!ca_file_.empty() && !broker_.tls)
      throw std::runtime_error("ca_file is for mqtts:// URLs; this one is " + url_);
    client_id_ = "kiwi-" + device_.node + "-" + std::string(ctx.instance_name);
    // The client now, so that what it refuses (an unreadable ca_file) refuses the configuration;
    // the connection is made by the first write(), on the output's thread once it runs: a reload
    // makes the new instance before the old one stops, and two clients of one id would take the
    // session from each other.
    make_client();
  }

  ~Mqtt() override {
    if (!started_) {
      mosquitto_destroy(mosq_);
      return;
    }
    bool connected = false;
    {
      std::unique_lock lock(mutex_);
      connected = connected_;
      stopping_ = true;
    }
    if (connected) {
      // A clean disconnect sends no last will: say "offline" ourselves, and wait until the
      // broker has it (QoS 1).
      int mid = 0;
      if (publish(topics_.availability(), "offline", &mid)) {
        std::unique_lock lock(mutex_);
        changed_.wait_for(lock, kOfflineWait, [&] { return acked_mid_ == mid || !connected_; });
      }
    }
    mosquitto_disconnect(mosq_);
    mosquitto_loop_stop(mosq_, false);  // the disconnect ends its loop
    mosquitto_destroy(mosq_);
  }

  kiwi::WriteResult write(const kiwi::OutputBatch& batch) override {
    if (!started_) connect();
    const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    std::unique_lock lock(mutex_);
    if (!ever_answered_) changed_.wait_for(lock, kFirstConnectWait, [&] { return ever_answered_; });
    for (const auto& s : batch.series) {
      if (s.points.empty()) continue;
      const kiwi::OutputPoint& newest = s.points.back();
      // Past readings (a catch-up after the agent was down) are not published as current.
      if (!kiwi_mqtt::is_current(newest.timestamp_ms, now_ms)) continue;
      Sensor& sensor = sensor_for(s);
      sensor.payload = kiwi_mqtt::state_payload(sensor.entity, newest.value);
      if (!connected_ || !sensor.payload) continue;
      if (!sensor.announced) announce(sensor);
      publish(topics_.state(sensor.entity.object), *sensor.payload);
    }
    if (connected_) return kiwi::WriteResult::ok();
    // A live feed: readings of the outage are not sent later as if current (retry would replay
    // the backlog, oldest first, into retained states). The newest are kept, and published as
    // soon as the connection is back; this batch counts as dropped, so /api/health shows why.
    return kiwi::WriteResult::drop("not connected to " + url_ + ": " +
                                   (last_problem_.empty() ? "connecting" : last_problem_) +
                                   "; the newest readings go out when it is back");
  }

 private:
  struct Sensor {
    kiwi_mqtt::Entity entity;
    std::optional<std::string> payload;  // the newest reading, as published
    bool announced = false;              // its config published on this connection
  };

  Sensor& sensor_for(const kiwi::OutputSeries& s) {
    std::string key = s.name;
    for (const auto& [k, v] : s.labels) key += "\x1f" + k + "=" + v;
    auto it = sensors_.find(key);
    if (it == sensors_.end()) {
      it = sensors_.emplace(key, Sensor{kiwi_mqtt::entity_for(s), {}, false}).first;
      order_.push_back(&it->second);
    }
    return it->second;
  }

  // Under mutex_ (or before the loop runs).
  bool publish(const std::string& topic, const std::string& payload, int* mid = nullptr) {
    const int rc = mosquitto_publish(mosq_, mid, topic.c_str(), static_cast<int>(payload.size()),
                                     payload.data(), kQos, true);
    return rc == MOSQ_ERR_SUCCESS;
  }

  void announce(Sensor& sensor) {
    sensor.announced = publish(topics_.config(sensor.entity.object),
                               kiwi_mqtt::discovery_json(sensor.entity, device_, topics_));
  }

  // On every (re)connect, and when Home Assistant says it is back: the configs (retained), then
  // "online", then the newest readings, so no one waits an interval to see current values.
  void announce_all() {
    for (Sensor* s : order_) {
      s->announced = false;
      announce(*s);
    }
    publish(topics_.availability(), "online");
    for (Sensor* s : order_)
      if (s->payload) publish(topics_.state(s->entity.object), *s->payload);
  }

  void make_client() {
    static const int init = mosquitto_lib_init();  // once per process; never cleaned up
    (void)init;
    mosq_ = mosquitto_new(client_id_.c_str(), true, this);
    if (!mosq_)
      throw std::runtime_error("mosquitto_new failed: " + std::string(std::strerror(errno)));
    mosquitto_int_option(mosq_, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311);
    if (!username_.empty())
      mosquitto_username_pw_set(mosq_, username_.c_str(),
                                password_.empty() ? nullptr : password_.c_str());
    if (broker_.tls) {
      const int rc = mosquitto_tls_set(mosq_, ca_file_.empty() ? nullptr : ca_file_.c_str(),
                                       ca_file_.empty() ? "/etc/ssl/certs" : nullptr, nullptr,
                                       nullptr, nullptr);
      if (rc != MOSQ_ERR_SUCCESS) {
        mosquitto_destroy(mosq_);
        throw std::runtime_error("ca_file \"" + ca_file_ + "\": " + mosquitto_strerror(rc) +
                                 " (a readable PEM file is needed)");
      }
    }
    const std::string offline = "offline";
    mosquitto_will_set(mosq_, topics_.availability().c_str(), static_cast<int>(offline.size()),
                       offline.data(), kQos, true);
    // libmosquitto's loop waits 1 s, 4 s, 9 s, 16 s ... (the square of the tries) at most 60 s
    // between tries, and tries again after a refused login too.
    mosquitto_reconnect_delay_set(mosq_, 1, 60, true);
    mosquitto_connect_callback_set(
        mosq_, [](mosquitto*, void* self, int rc) { static_cast<Mqtt*>(self)->on_connect(rc); });
    mosquitto_disconnect_callback_set(
        mosq_, [](mosquitto*, void* self, int rc) { static_cast<Mqtt*>(self)->on_disconnect(rc); });
    mosquitto_publish_callback_set(mosq_, [](mosquitto*, void* self, int mid) {
      auto* me = static_cast<Mqtt*>(self);
      std::lock_guard lock(me->mutex_);
      me->acked_mid_ = mid;
      me->changed_.notify_all();
    });
    mosquitto_message_callback_set(mosq_, [](mosquitto*, void* self, const mosquitto_message* m) {
      static_cast<Mqtt*>(self)->on_message(*m);
    });
  }

  // Starts libmosquitto's thread on its first connection; from then on it reconnects by itself.
  void connect() {
    started_ = true;
    const int rc =
        mosquitto_connect_async(mosq_, broker_.host.c_str(), broker_.port, kKeepAliveSeconds);
    if (rc != MOSQ_ERR_SUCCESS) {
      // The loop tries again with backoff.
      const std::string why = rc == MOSQ_ERR_ERRNO ? std::strerror(errno) : mosquitto_strerror(rc);
      std::lock_guard lock(mutex_);
      note_problem("cannot connect (" + why + "); trying again with backoff");
      ever_answered_ = true;
    }
    if (const int loop = mosquitto_loop_start(mosq_); loop != MOSQ_ERR_SUCCESS) {
      std::lock_guard lock(mutex_);
      note_problem("mosquitto_loop_start: " + std::string(mosquitto_strerror(loop)));
      ever_answered_ = true;
      started_ = false;  // tried again at the next write()
    }
  }

  // Logs a problem when it is new (not once per try of the backoff).
  void note_problem(const std::string& what) {
    if (what != last_problem_) log_.warn("cannot publish to " + url_ + ": " + what);
    last_problem_ = what;
  }

  void on_connect(int rc) {
    std::lock_guard lock(mutex_);
    ever_answered_ = true;
    changed_.notify_all();
    if (rc != 0) {
      note_problem("the broker refused the connection: " + refusal(rc));
      return;
    }
    connected_ = true;
    log_.info("connected to " + url_ + " as " + client_id_ + "; discovery under " +
              topics_.discovery_prefix + "/sensor/" + device_.node + "/");
    last_problem_.clear();
    mosquitto_subscribe(mosq_, nullptr, topics_.ha_status().c_str(), kQos);
    announce_all();
  }

  void on_disconnect(int rc) {
    std::lock_guard lock(mutex_);
    const bool was = connected_;
    connected_ = false;
    changed_.notify_all();
    if (stopping_ || rc == 0) return;
    if (was)
      note_problem("connection lost (" + std::string(mosquitto_strerror(rc)) +
                   "); reconnecting with backoff");
    else if (last_problem_.empty())
      note_problem("cannot connect (" + std::string(mosquitto_strerror(rc)) +
                   "); trying again with backoff");
  }

  void on_message(const mosquitto_message& m) {
    const std::string payload(static_cast<const char*>(m.payload),
                              static_cast<std::size_t>(std::max(0, m.payloadlen)));
    std::lock_guard lock(mutex_);
    // Home Assistant's birth message: it (re)started and may have lost what it knew.
    if (connected_ && m.topic == topics_.ha_status() && payload == "online") announce_all();
  }

  kiwi::Logger& log_;
  kiwi_mqtt::Broker broker_;
  std::string url_, username_, password_, ca_file_, client_id_;
  kiwi_mqtt::Device device_;
  kiwi_mqtt::Topics topics_;
  mosquitto* mosq_ = nullptr;
  bool started_ = false;  // connect() ran: libmosquitto's thread runs (write()'s thread only)

  std::mutex mutex_;  // what follows, shared by write() and libmosquitto's thread
  std::condition_variable changed_;
  bool connected_ = false;
  bool ever_answered_ = false;  // a CONNACK or a failure since start()
  bool stopping_ = false;
  int acked_mid_ = -1;
  std::string last_problem_;
  std::map<std::string, Sensor> sensors_;
  std::vector<Sensor*> order_;  // first seen first
};

}  // namespace

KIWI_OUTPUT_PLUGIN(Mqtt, "mqtt",
                   "MQTT with Home Assistant discovery (libmosquitto): the newest readings, "
                   "retained, with availability and a last will",
                   kOptions)
