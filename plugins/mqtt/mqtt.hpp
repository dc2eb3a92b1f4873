// MQTT with Home Assistant discovery, the pure parts: the broker's URL, topics and object ids,
// each series as a Home Assistant sensor (unit, device_class, state_class, the value's scale),
// the discovery message, and the board's model and maker from the device tree or DMI. The
// connection (libmosquitto) is in plugin.cpp.
#pragma once

#include <cstdint>
#include <kiwi/output.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace kiwi_mqtt {

// "mqtt://host[:1883]" or "mqtts://host[:8883]" (a path, user info or query is refused).
struct Broker {
  std::string host;
  int port = 1883;
  bool tls = false;
};
// Throws std::runtime_error naming what is accepted.
Broker parse_url(std::string_view url);

// An MQTT topic level and Home Assistant id: [A-Za-z0-9_-], other bytes as '_' (runs of them
// as one, none at the ends). "my.pi" -> "my_pi".
std::string topic_id(std::string_view text);

// The object id of a series: its name and its label values, lowercase; a label value "/" (the
// root mount) is "root". thermal_celsius{sensor="cpu-thermal"} -> "thermal_celsius_cpu-thermal".
std::string object_id(const kiwi::OutputSeries& series);

// What Home Assistant is told of one series.
struct Entity {
  std::string object;          // object_id()
  std::string name;            // "CPU usage", "Temperature cpu-thermal", "Storage used /"
  std::string unit;            // unit_of_measurement; "" for none
  std::string device_class;    // "" for none
  std::string state_class;     // "measurement" (gauges) or "total_increasing" (counters)
  double scale = 1;            // published value = stored value * scale (ratios as percent)
  int display_precision = -1;  // suggested_display_precision (decimals); -1 for none
};
Entity entity_for(const kiwi::OutputSeries& series);

// The value as the state topic carries it: the shortest decimal, "nan" never (nullopt).
std::optional<std::string> state_payload(const Entity& entity, double value);

// A reading this old (by the tick's time) is not published as current: after the agent was
// down, its catch-up batches hold past readings.
inline constexpr std::int64_t kCurrentForMs = 60'000;
inline bool is_current(std::int64_t tick_ms, std::int64_t now_ms) {
  return now_ms - tick_ms <= kCurrentForMs;
}

struct Topics {
  std::string discovery_prefix = "homeassistant";
  std::string topic_prefix = "kiwi";
  std::string node;  // topic_id() of the node name
  // <discovery_prefix>/sensor/<node>/<object>/config
  std::string config(std::string_view object) const;
  // <topic_prefix>/<node>/<object>/state
  std::string state(std::string_view object) const;
  // <topic_prefix>/<node>/availability: "online", or "offline" (also the last will)
  std::string availability() const;
  // <discovery_prefix>/status: Home Assistant's own birth ("online") and will
  std::string ha_status() const;
};

// The board, where its firmware says: device tree (Arm boards) or DMI (PCs).
struct Board {
  std::string model;         // "Raspberry Pi 4 Model B Rev 1.4"; "" when unknown
  std::string manufacturer;  // "Raspberry Pi Ltd"; "" when unknown
};
// From the files' texts (nullopt: absent): devicetree/base/model and compatible (NUL-separated;
// the maker from the first entry's vendor prefix where it is a known one), else DMI's
// product_name and sys_vendor (placeholders such as "To Be Filled By O.E.M." are no answer).
Board board_from(const std::optional<std::string>& dt_model,
                 const std::optional<std::string>& dt_compatible,
                 const std::optional<std::string>& dmi_product,
                 const std::optional<std::string>& dmi_vendor);
// Reads them under `sysfs` ("/sys"): firmware/devicetree/base/{model,compatible},
// class/dmi/id/{product_name,sys_vendor}.
Board read_board(const std::string& sysfs);

struct Device {
  std::string node;  // topic_id()
  std::string name;  // as configured (the host name by default)
  Board board;
  std::string sw_version;
};

// The retained discovery config of one sensor (JSON): name, unique_id, object_id, state_topic,
// availability_topic, unit_of_measurement, device_class, state_class,
// suggested_display_precision (the last four only when set), and the device (identifiers, name,
// model, manufacturer, sw_version).
std::string discovery_json(const Entity& entity, const Device& device, const Topics& topics);

}  // namespace kiwi_mqtt
