#include "mqtt.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <kiwi/io.hpp>
#include <kiwi/json.hpp>
#include <kiwi/text.hpp>
#include <stdexcept>

namespace kiwi_mqtt {

namespace {

using kiwi::Unit;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A sysfs/DMI text: up to its first NUL (device-tree strings end with one), trimmed.
std::string first_string(std::string_view text) {
  return std::string(kiwi::trim(text.substr(0, text.find('\0'))));
}

// Device-tree vendor prefixes (the kernel's vendor-prefixes.yaml) of the boards people run this
// on, as their makers name themselves.
constexpr std::pair<std::string_view, std::string_view> kVendors[] = {
    {"raspberrypi", "Raspberry Pi Ltd"},
    {"radxa", "Radxa"},
    {"pine64", "Pine64"},
    {"hardkernel", "Hardkernel"},
    {"friendlyarm", "FriendlyElec"},
    {"xunlong", "Shenzhen Xunlong (Orange Pi)"},
    {"khadas", "Khadas"},
    {"libretech", "Libre Computer"},
    {"beagle", "BeagleBoard.org"},
    {"nvidia", "NVIDIA"},
    {"rockchip", "Rockchip"},
    {"firefly", "Firefly"},
};

// DMI fields that firmware leaves at a vendor's placeholder.
bool placeholder(std::string_view s) {
  const std::string l = lower(std::string(s));
  return l.empty() || l == "to be filled by o.e.m." || l == "system product name" ||
         l == "system manufacturer" || l == "default string" || l == "not applicable" ||
         l == "not specified" || l == "none" || l == "o.e.m." || l == "oem";
}

// The unit suffix a series name ends with (the Prometheus naming the SDK checks), left out of
// the display name: "cpu_usage_ratio" -> "cpu usage".
constexpr std::string_view kSuffixes[] = {"_ratio", "_celsius",   "_hertz", "_bytes",
                                          "_volts", "_amperes",   "_watts", "_seconds",
                                          "_rpm",   "_per_second"};

// Names for the default series, as a dashboard card words them.
constexpr std::pair<std::string_view, std::string_view> kNames[] = {
    {"cpu_usage_ratio", "CPU usage"},
    {"thermal_celsius", "Temperature"},
    {"thermal_max_celsius", "Hottest temperature"},
    {"memory_used_ratio", "Memory used"},
    {"storage_used_ratio", "Storage used"},
    {"power_under_voltage_alarm", "Under-voltage"},
};

std::string display_name(std::string_view series) {
  for (auto [name, words] : kNames)
    if (name == series) return std::string(words);
  std::string stem(series);
  if (stem.ends_with("_total")) stem.resize(stem.size() - 6);  // a counter's, before its unit
  for (std::string_view s : kSuffixes)
    if (stem.ends_with(s) && stem.size() > s.size()) {
      stem.resize(stem.size() - s.size());
      break;
    }
  std::replace(stem.begin(), stem.end(), '_', ' ');
  if (stem.starts_with("cpu ")) stem.replace(0, 3, "CPU");
  if (!stem.empty()) stem[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(stem[0])));
  return stem;
}

struct UnitMapping {
  Unit unit;
  std::string_view symbol, device_class;
  double scale;
  int display_precision;  // percent and degrees to a tenth; the rest as they come
};
// Home Assistant's units and device classes (homeassistant/const.py, sensor/const.py).
constexpr UnitMapping kUnits[] = {
    {Unit::ratio, "%", "", 100, 1},          {Unit::celsius, "°C", "temperature", 1, 1},
    {Unit::bytes, "B", "data_size", 1, -1},  {Unit::bytes_per_second, "B/s", "data_rate", 1, -1},
    {Unit::hertz, "Hz", "frequency", 1, -1}, {Unit::volts, "V", "voltage", 1, -1},
    {Unit::amperes, "A", "current", 1, -1},  {Unit::watts, "W", "power", 1, -1},
    {Unit::seconds, "s", "duration", 1, -1}, {Unit::rpm, "rpm", "", 1, -1},
    {Unit::per_second, "/s", "", 1, -1},
};

void member(std::string& out, std::string_view key, std::string_view value) {
  if (value.empty()) return;
  if (out.back() != '{') out += ',';
  kiwi::append_json_string(out, key);
  out += ':';
  kiwi::append_json_string(out, value);
}

}  // namespace

Broker parse_url(std::string_view url) {
  Broker b;
  std::string_view rest;
  if (url.starts_with("mqtt://")) {
    rest = url.substr(7);
  } else if (url.starts_with("mqtts://")) {
    rest = url.substr(8);
    b.tls = true;
    b.port = 8883;
  } else {
    throw std::runtime_error("url \"" + std::string(url) +
                             "\" is not mqtt://host[:port] or mqtts://host[:port]");
  }
  if (rest.ends_with('/')) rest.remove_suffix(1);
  if (rest.find_first_of("/?#@") != std::string_view::npos)
    throw std::runtime_error("url \"" + std::string(url) +
                             "\": only mqtt://host[:port] or mqtts://host[:port] (set username "
                             "and password_file apart)");
  std::string_view host = rest;
  if (rest.starts_with('[')) {  // [::1]:1883
    const auto close = rest.find(']');
    if (close == std::string_view::npos)
      throw std::runtime_error("url \"" + std::string(url) + "\": no ']' after the IPv6 address");
    host = rest.substr(1, close - 1);
    rest.remove_prefix(close + 1);
    if (!rest.empty() && !rest.starts_with(':'))
      throw std::runtime_error("url \"" + std::string(url) + "\": ':' or nothing after ']'");
  } else if (const auto colon = rest.rfind(':'); colon != std::string_view::npos) {
    host = rest.substr(0, colon);
    rest.remove_prefix(colon);
  } else {
    rest = {};
  }
  if (host.empty()) throw std::runtime_error("url \"" + std::string(url) + "\" names no host");
  b.host = std::string(host);
  if (rest.starts_with(':')) {
    const auto port = kiwi::to_number<int>(rest.substr(1));
    if (!port || *port < 1 || *port > 65535)
      throw std::runtime_error("url \"" + std::string(url) + "\": the port is not 1..65535");
    b.port = *port;
  }
  return b;
}

std::string topic_id(std::string_view text) {
  std::string out;
  for (char c : text) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
    if (ok)
      out += c;
    else if (!out.empty() && out.back() != '_')
      out += '_';
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out;
}

std::string object_id(const kiwi::OutputSeries& series) {
  std::string text = series.name;
  for (const auto& [label, value] : series.labels) text += "_" + (value == "/" ? "root" : value);
  return lower(topic_id(text));
}

Entity entity_for(const kiwi::OutputSeries& series) {
  Entity e;
  e.object = object_id(series);
  e.name = display_name(series.name);
  for (const auto& [label, value] : series.labels) e.name += " " + value;
  e.state_class = series.kind == kiwi::MetricKind::counter ? "total_increasing" : "measurement";
  for (const auto& m : kUnits)
    if (m.unit == series.unit) {
      e.unit = m.symbol;
      e.device_class = m.device_class;
      e.scale = m.scale;
      e.display_precision = m.display_precision;
    }
  return e;
}

std::optional<std::string> state_payload(const Entity& entity, double value) {
  const double v = value * entity.scale;
  if (!std::isfinite(v)) return std::nullopt;
  std::string out;
  kiwi::append_json_number(out, v);
  return out;
}

std::string Topics::config(std::string_view object) const {
  return discovery_prefix + "/sensor/" + node + "/" + std::string(object) + "/config";
}
std::string Topics::state(std::string_view object) const {
  return topic_prefix + "/" + node + "/" + std::string(object) + "/state";
}
std::string Topics::availability() const {
  return topic_prefix + "/" + node + "/availability";
}
std::string Topics::ha_status() const {
  return discovery_prefix + "/status";
}

Board board_from(const std::optional<std::string>& dt_model,
                 const std::optional<std::string>& dt_compatible,
                 const std::optional<std::string>& dmi_product,
                 const std::optional<std::string>& dmi_vendor) {
  Board b;
  if (dt_model) b.model = first_string(*dt_model);
  if (dt_compatible) {
    const std::string first = first_string(*dt_compatible);  // "raspberrypi,4-model-b"
    const std::string vendor = first.substr(0, first.find(','));
    for (auto [prefix, maker] : kVendors)
      if (prefix == vendor) b.manufacturer = maker;
  }
  if (b.model.empty() && dmi_product && !placeholder(first_string(*dmi_product)))
    b.model = first_string(*dmi_product);
  if (b.manufacturer.empty() && dmi_vendor && !placeholder(first_string(*dmi_vendor)))
    b.manufacturer = first_string(*dmi_vendor);
  return b;
}

Board read_board(const std::string& sysfs) {
  auto read = [&](std::string_view relative) {
    return kiwi::read_file_if_readable(kiwi::join_path(sysfs, relative));
  };
  return board_from(read("firmware/devicetree/base/model"),
                    read("firmware/devicetree/base/compatible"), read("class/dmi/id/product_name"),
                    read("class/dmi/id/sys_vendor"));
}

std::string discovery_json(const Entity& entity, const Device& device, const Topics& topics) {
  std::string out = "{";
  member(out, "name", entity.name);
  member(out, "unique_id", "kiwi_" + device.node + "_" + entity.object);
  member(out, "object_id", device.node + "_" + entity.object);
  member(out, "state_topic", topics.state(entity.object));
  member(out, "availability_topic", topics.availability());
  member(out, "unit_of_measurement", entity.unit);
  member(out, "device_class", entity.device_class);
  member(out, "state_class", entity.state_class);
  if (entity.display_precision >= 0)
    out += ",\"suggested_display_precision\":" + std::to_string(entity.display_precision);
  out += ",\"device\":{\"identifiers\":[";
  kiwi::append_json_string(out, "kiwi_" + device.node);
  out += "]";
  member(out, "name", device.name);
  member(out, "model", device.board.model);
  member(out, "manufacturer", device.board.manufacturer);
  member(out, "sw_version", device.sw_version);
  out += "}}";
  return out;
}

}  // namespace kiwi_mqtt
