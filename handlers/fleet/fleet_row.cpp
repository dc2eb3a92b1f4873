#include "fleet_row.hpp"

#include <rapidjson/document.h>

#include <algorithm>
#include <cmath>
#include <kiwi/json.hpp>

namespace kiwi_fleet {

namespace {

std::string_view label(const kiwi::MetricValue& m, std::string_view name) {
  for (const auto& [k, v] : m.labels)
    if (k == name) return v;
  return {};
}

std::string cut(std::string_view s) {
  return std::string(s.substr(0, kMaxText));
}

void append_number(std::string& out, const std::optional<double>& v) {
  if (v && std::isfinite(*v))
    kiwi::append_json_shortest(out, *v);
  else
    out += "null";
}

// Milliseconds as an integer (a time or an age), or null.
void append_ms(std::string& out, const std::optional<double>& v) {
  if (v && std::isfinite(*v))
    out += std::to_string(std::llround(*v));
  else
    out += "null";
}

void append_key(std::string& out, std::string_view key) {
  out += ',';
  kiwi::append_json_string(out, key);
  out += ':';
}

}  // namespace

BoardValues board_values(const kiwi::Snapshot& snapshot, std::span<const kiwi::Alert> alerts,
                         double now_ms) {
  BoardValues v;
  v.host = snapshot.host;
  v.agent_version = snapshot.agent_version;
  v.timestamp_ms = std::round(snapshot.timestamp * 1000);
  v.age_ms = snapshot.sequence == 0 ? 0 : static_cast<std::int64_t>(now_ms - v.timestamp_ms);
  v.stale = snapshot.sequence == 0 || v.age_ms > snapshot.stale_after_seconds * 1000;
  for (const auto& report : snapshot.sensors) {
    if (report.name == kiwi::kAgentReport || report.name == kiwi::kAlertsReport) continue;
    for (const auto& m : report.metrics) {
      if (!std::isfinite(m.value)) continue;
      if (m.name == "cpu_usage_ratio") {
        v.cpu_ratio = m.value;
      } else if (m.name == "memory_used_ratio") {
        v.memory_ratio = m.value;
      } else if (m.name == "thermal_celsius") {
        if (!v.temperature || m.value > v.temperature->celsius)
          v.temperature = Temperature{m.value, std::string(label(m, "sensor"))};
      } else if (m.name == "storage_used_ratio") {
        if (!v.filesystem || m.value > v.filesystem->used_ratio)
          v.filesystem = Filesystem{std::string(label(m, "mount")), m.value};
      } else if (m.name == "power_throttle_flag") {
        if (!v.power) v.power = Power{};
        if (label(m, "when") != "now" || m.value == 0) continue;
        const std::string_view flag = label(m, "flag");
        if (flag == "under_voltage")
          v.power->under_voltage = true;
        else if (flag == "throttled" || flag == "frequency_capped" ||
                 flag == "soft_temperature_limit")
          v.power->throttled = true;
      }
    }
  }
  for (const auto& a : alerts) {
    if (a.state != kiwi::AlertState::firing) continue;
    ++v.firing;
    if (std::find(v.alert_names.begin(), v.alert_names.end(), a.name) == v.alert_names.end())
      v.alert_names.push_back(a.name);
  }
  std::sort(v.alert_names.begin(), v.alert_names.end());
  if (v.alert_names.size() > kMaxAlertNames) v.alert_names.resize(kMaxAlertNames);
  return v;
}

void append_row(std::string& out, const RowMeta& meta, const BoardValues* values) {
  out += "{\"name\":";
  kiwi::append_json_string(out, meta.name);
  out += meta.self ? ",\"self\":true" : ",\"self\":false";
  append_key(out, "url");
  kiwi::append_json_string(out, meta.url);
  append_key(out, "status");
  kiwi::append_json_string(out, meta.status);
  append_key(out, "error");
  kiwi::append_json_string(out, meta.error);
  append_key(out, "last_seen_ms");
  append_ms(out, meta.last_seen_ms);
  const BoardValues none;
  const BoardValues& v = values ? *values : none;
  append_key(out, "host");
  kiwi::append_json_string(out, v.host);
  append_key(out, "agent_version");
  kiwi::append_json_string(out, v.agent_version);
  append_key(out, "age_ms");
  append_ms(out, values ? std::optional<double>(static_cast<double>(v.age_ms)) : std::nullopt);
  append_key(out, "cpu_ratio");
  append_number(out, v.cpu_ratio);
  append_key(out, "temperature");
  if (v.temperature) {
    out += "{\"celsius\":";
    append_number(out, v.temperature->celsius);
    append_key(out, "zone");
    kiwi::append_json_string(out, v.temperature->zone);
    out += '}';
  } else {
    out += "null";
  }
  append_key(out, "memory_ratio");
  append_number(out, v.memory_ratio);
  append_key(out, "filesystem");
  if (v.filesystem) {
    out += "{\"mount\":";
    kiwi::append_json_string(out, v.filesystem->mount);
    append_key(out, "used_ratio");
    append_number(out, v.filesystem->used_ratio);
    out += '}';
  } else {
    out += "null";
  }
  append_key(out, "power");
  if (v.power) {
    out += v.power->under_voltage ? "{\"under_voltage\":true" : "{\"under_voltage\":false";
    out += v.power->throttled ? ",\"throttled\":true}" : ",\"throttled\":false}";
  } else {
    out += "null";
  }
  append_key(out, "alerts");
  out += "{\"firing\":" + std::to_string(v.firing) + ",\"names\":[";
  for (std::size_t i = 0; i < v.alert_names.size(); ++i) {
    if (i) out += ',';
    kiwi::append_json_string(out, v.alert_names[i]);
  }
  out += "]}}";
}

std::optional<BoardValues> parse_self_answer(std::string_view body, std::string& why) {
  rapidjson::Document doc;
  // Iterative: a hostile peer's deep nesting costs heap within kMaxRowBody, never the stack.
  doc.Parse<rapidjson::kParseIterativeFlag>(body.data(), body.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    why = "its answer is not JSON";
    return std::nullopt;
  }
  // Read through a const view: clang 14 finds a non-const MemberIterator's == ambiguous (C++20).
  const rapidjson::Value& root = doc;
  auto boards = root.FindMember("boards");
  if (boards == root.MemberEnd() || !boards->value.IsArray() || boards->value.Empty() ||
      !boards->value[0].IsObject()) {
    why = "its answer has no board (not a kiwi-agent /api/fleet)";
    return std::nullopt;
  }
  const auto& row = boards->value[0];
  auto number = [&](const rapidjson::Value& obj, const char* key) -> std::optional<double> {
    auto it = obj.FindMember(key);
    if (it == obj.MemberEnd() || !it->value.IsNumber()) return std::nullopt;
    const double d = it->value.GetDouble();
    return std::isfinite(d) ? std::optional<double>(d) : std::nullopt;
  };
  auto text = [&](const rapidjson::Value& obj, const char* key) -> std::string {
    auto it = obj.FindMember(key);
    if (it == obj.MemberEnd() || !it->value.IsString()) return {};
    return cut(std::string_view(it->value.GetString(), it->value.GetStringLength()));
  };
  auto object = [&](const char* key) -> const rapidjson::Value* {
    auto it = row.FindMember(key);
    return it != row.MemberEnd() && it->value.IsObject() ? &it->value : nullptr;
  };
  auto flag = [&](const rapidjson::Value& obj, const char* key) {
    auto it = obj.FindMember(key);
    return it != obj.MemberEnd() && it->value.IsBool() && it->value.GetBool();
  };
  BoardValues v;
  v.host = text(row, "host");
  v.agent_version = text(row, "agent_version");
  v.stale = text(row, "status") != "up";
  v.timestamp_ms = number(row, "last_seen_ms").value_or(0);
  v.age_ms = static_cast<std::int64_t>(std::clamp(number(row, "age_ms").value_or(0), -1e15, 1e15));
  v.cpu_ratio = number(row, "cpu_ratio");
  v.memory_ratio = number(row, "memory_ratio");
  if (const auto* t = object("temperature"))
    if (auto c = number(*t, "celsius")) v.temperature = Temperature{*c, text(*t, "zone")};
  if (const auto* f = object("filesystem"))
    if (auto r = number(*f, "used_ratio")) v.filesystem = Filesystem{text(*f, "mount"), *r};
  if (const auto* p = object("power"))
    v.power = Power{flag(*p, "under_voltage"), flag(*p, "throttled")};
  if (const auto* a = object("alerts")) {
    v.firing = static_cast<std::size_t>(std::clamp(number(*a, "firing").value_or(0), 0.0, 1e9));
    auto names = a->FindMember("names");
    if (names != a->MemberEnd() && names->value.IsArray())
      for (const auto& n : names->value.GetArray())
        if (n.IsString() && v.alert_names.size() < kMaxAlertNames)
          v.alert_names.push_back(cut(std::string_view(n.GetString(), n.GetStringLength())));
  }
  return v;
}

}  // namespace kiwi_fleet
