// kiwi-agent plugin SDK (C++): what every plugin shares: options, logging, the option and metric
// tables, units.
//
// The boundary between the agent and a plugin is the C ABI in kiwi/plugin.h; this C++ SDK is a
// header-only wrapper over it. A C++ plugin writes classes against sensor.hpp or handler.hpp and
// declares itself with KIWI_SENSOR_PLUGIN or KIWI_HANDLER_PLUGIN, which export the one C entry
// point (kiwi_plugin_v1) with a descriptor made from these tables (kiwi/abi.hpp). None of the
// types below crosses the boundary itself, so the agent and a plugin may be built with different
// compilers, standard libraries or SDK minor versions (docs/plugins.md "ABI rules").
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "kiwi/plugin.h"

namespace kiwi {

enum class PluginKind : std::uint32_t { sensor = 1, handler = 2 };

inline std::string_view to_string(PluginKind kind) {
  return kind == PluginKind::sensor ? "sensor" : "handler";
}

// Option types a plugin may declare. The host parses the TOML value, checks its type and fills in
// the default, so a plugin reads its options without any validation of its own.
//   duration  a TOML string in the config's duration syntax: "500ms", "10s", "2m", "1h30m", "7d"
//   size      bytes: a TOML integer (65536), or a string with a unit: "512", "64KiB", "1MiB",
//             "2GiB", "10kB", "5MB" (binary units are powers of 1024, decimal ones of 1000)
enum class OptionType : std::uint32_t {
  boolean,
  integer,
  number,
  string,
  string_list,
  duration,
  size
};

// One row of a plugin's option table: declared once, it drives validation (unknown keys and wrong
// types are errors naming file:line:col), defaults, `kiwi-agent --describe-plugin` and the README.
struct OptionSpec {
  std::string_view key;
  OptionType type;
  std::string_view
      default_toml;              // the default as a TOML literal: "true", "30", "\"/\"", "[\"lo\"]"
  std::string_view description;  // one line, what it does and in which unit
  // An inclusive range, checked when has_range: for integer, number, duration (in milliseconds)
  // and size (in bytes). {"timeout", OptionType::duration, "\"2s\"", "...", true, 10, 60000}
  bool has_range = false;
  double min = 0;
  double max = 0;
};

// A validated option value. Only the member matching `type` is meaningful.
struct OptionValue {
  std::string key;
  OptionType type = OptionType::string;
  bool boolean = false;
  std::int64_t integer = 0;
  double number = 0;
  std::string string;
  std::vector<std::string> string_list;
  std::chrono::milliseconds duration{0};
  std::uint64_t size = 0;  // bytes
};

// The options of one plugin instance: every key of the plugin's table, in table order, with the
// user's value or the default. Asking for a key the table does not declare, or with another type,
// is a programming error and throws std::logic_error.
class Options {
 public:
  Options() = default;
  explicit Options(std::vector<OptionValue> values) : values_(std::move(values)) {}

  bool get_bool(std::string_view key) const { return find(key, OptionType::boolean).boolean; }
  std::int64_t get_int(std::string_view key) const {
    return find(key, OptionType::integer).integer;
  }
  double get_number(std::string_view key) const { return find(key, OptionType::number).number; }
  const std::string& get_string(std::string_view key) const {
    return find(key, OptionType::string).string;
  }
  const std::vector<std::string>& get_strings(std::string_view key) const {
    return find(key, OptionType::string_list).string_list;
  }
  std::chrono::milliseconds get_duration(std::string_view key) const {
    return find(key, OptionType::duration).duration;
  }
  std::uint64_t get_size(std::string_view key) const { return find(key, OptionType::size).size; }
  const std::vector<OptionValue>& values() const { return values_; }

 private:
  const OptionValue& find(std::string_view key, OptionType type) const {
    for (const auto& v : values_)
      if (v.key == key) {
        if (v.type != type) throw std::logic_error("option '" + v.key + "' read with wrong type");
        return v;
      }
    throw std::logic_error("option '" + std::string(key) + "' is not declared by the plugin");
  }
  std::vector<OptionValue> values_;
};

enum class LogLevel : std::uint32_t { error = 0, warn = 1, info = 2, debug = 3 };

// Host logger. Thread-safe: may be called from any thread at any time during the plugin's life.
class Logger {
 public:
  virtual void log(LogLevel level, std::string_view message) = 0;
  void error(std::string_view m) { log(LogLevel::error, m); }
  void warn(std::string_view m) { log(LogLevel::warn, m); }
  void info(std::string_view m) { log(LogLevel::info, m); }
  void debug(std::string_view m) { log(LogLevel::debug, m); }

 protected:
  ~Logger() = default;
};

// For plugins without options: KIWI_SENSOR_PLUGIN(X, "x", "...", kiwi::no_options, kMetrics)
inline constexpr std::span<const OptionSpec> no_options{};

// The units a metric may have: base units only (README "Plugins"), a closed set; "" is a unitless
// value. In the C ABI a unit is its code, KIWI_UNIT_<NAME> (kiwi/plugin.h): kUnits[code - 1], and
// 0 for "".
inline constexpr std::string_view kUnits[] = {
    "bytes", "seconds", "celsius", "hertz", "ratio", "count", "bytes_per_second", "per_second", ""};

inline constexpr bool is_known_unit(std::string_view unit) {
  for (auto u : kUnits)
    if (u == unit) return true;
  return false;
}

// A unit's C ABI code; UINT32_MAX for a name not in kUnits (the agent then drops the metric).
inline constexpr std::uint32_t unit_code(std::string_view unit) {
  if (unit.empty()) return KIWI_UNIT_NONE;
  for (std::uint32_t i = 0; i + 1 < std::size(kUnits); ++i)
    if (kUnits[i] == unit) return i + 1;
  return UINT32_MAX;
}

// A code's unit name; "" for KIWI_UNIT_NONE and for a code this SDK does not know.
inline constexpr std::string_view unit_name(std::uint32_t code) {
  return code >= 1 && code < std::size(kUnits) ? kUnits[code - 1] : std::string_view();
}

// One metric a sensor emits: its stable name, unit, labels and meaning. The table drives the
// Prometheus HELP/TYPE lines and the plugin's README; emitting a name not in it is allowed (it gets
// a generic HELP) but is a bug worth a test.
struct MetricSpec {
  std::string_view name;    // e.g. "cpu_core_usage_ratio"
  std::string_view unit;    // one of kiwi::kUnits: bytes, seconds, ..., ""
  bool counter;             // false: gauge
  std::string_view labels;  // comma list, e.g. "core" ("" for none)
  std::string_view help;    // one line: what it measures and where it comes from
};

// For handlers, and sensors whose metrics are not known in advance.
inline constexpr std::span<const MetricSpec> no_metrics{};

// What a plugin says about itself (the agent reads it from the plugin's descriptor).
struct PluginInfo {
  PluginKind kind;
  std::string_view name;         // default lookup name, e.g. "cpu" -> kiwi-sensor-cpu.so
  std::string_view description;  // one line
  std::span<const OptionSpec> options;
  std::span<const MetricSpec> metrics;  // sensors: everything they may emit; handlers: none
};

}  // namespace kiwi
