// kiwi-agent plugin SDK (C++): what every plugin shares: options, logging, the option and metric
// tables, units and kinds.
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
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "kiwi/plugin.h"

namespace kiwi {

// output: ABI 1.1; notifier: ABI 1.6. The name is the kind's in a plugin's file name:
// kiwi-<kind>-<name>.so.
enum class PluginKind : std::uint32_t { sensor = 1, handler = 2, output = 3, notifier = 4 };

inline std::string_view to_string(PluginKind kind) {
  switch (kind) {
    case PluginKind::sensor:
      return "sensor";
    case PluginKind::handler:
      return "handler";
    case PluginKind::output:
      return "output";
    case PluginKind::notifier:
      return "notifier";
  }
  return "unknown";
}

// Option types a plugin may declare. The host parses the TOML value, checks its type and fills in
// the default, so a plugin reads its options without any validation of its own.
//   duration  a TOML string in the config's duration syntax: "500ms", "10s", "2m", "1h30m", "7d"
//   size      bytes: a TOML integer (65536), or a string with a unit: "512", "64KiB", "1MiB",
//             "2GiB", "10kB", "5MB" (binary units are powers of 1024, decimal ones of 1000)
//   string_table  a TOML table of strings: headers = { "X-Scope-OrgID" = "pi" } (ABI 1.1)
// A string row with `choices` is an enum: the value must be one of them (ABI 1.3).
enum class OptionType : std::uint32_t {
  boolean,
  integer,
  number,
  string,
  string_list,
  duration,
  size,
  string_table
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
  // A closed set of words, comma-separated: "prometheus,json" ("" for none; ABI 1.3). On a string
  // row the value must be one of them, and the host's error lists them. On an integer row they are
  // accepted besides numbers in range ("auto"): the value's `string` is then the word, `integer` 0.
  // An agent older than 1.3 does not check them (the row is a plain string there).
  std::string_view choices = {};
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
  std::vector<std::pair<std::string, std::string>> table;  // string_table, in the table's order
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
  const std::vector<std::pair<std::string, std::string>>& get_table(std::string_view key) const {
    return find(key, OptionType::string_table).table;
  }
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

// The units a metric may have: base units only (README "Plugins"), a closed set. The codes are
// the C ABI's KIWI_UNIT_<NAME> (kiwi/plugin.h); `none` is a unitless value.
enum class Unit : std::uint32_t {
  none = KIWI_UNIT_NONE,
  bytes = KIWI_UNIT_BYTES,
  seconds = KIWI_UNIT_SECONDS,
  celsius = KIWI_UNIT_CELSIUS,
  hertz = KIWI_UNIT_HERTZ,
  ratio = KIWI_UNIT_RATIO,
  count = KIWI_UNIT_COUNT,
  bytes_per_second = KIWI_UNIT_BYTES_PER_SECOND,
  per_second = KIWI_UNIT_PER_SECOND,
  // ABI 1.5 (kiwi/plugin.h says what an agent of 1.4 or older does with them):
  volts = KIWI_UNIT_VOLTS,
  amperes = KIWI_UNIT_AMPERES,
  watts = KIWI_UNIT_WATTS,
  rpm = KIWI_UNIT_RPM,  // revolutions per minute: a fan's speed
};

// Each unit's name as the API writes it, indexed by code: "" for none.
inline constexpr std::string_view kUnits[] = {
    "",           "bytes", "seconds", "celsius", "hertz", "ratio", "count", "bytes_per_second",
    "per_second", "volts", "amperes", "watts",   "rpm"};

inline constexpr bool is_known_unit(Unit unit) {
  return static_cast<std::uint32_t>(unit) < std::size(kUnits);
}

// A unit's name; "" for none and for a code this SDK does not know (is_known_unit tells them
// apart).
inline constexpr std::string_view to_string(Unit unit) {
  return is_known_unit(unit) ? kUnits[static_cast<std::uint32_t>(unit)] : std::string_view();
}

// The unit of a name, "" being none; nullopt for a name not in kUnits.
inline constexpr std::optional<Unit> unit_from_string(std::string_view name) {
  for (std::uint32_t i = 0; i < std::size(kUnits); ++i)
    if (kUnits[i] == name) return static_cast<Unit>(i);
  return std::nullopt;
}

// The units for a message: "bytes, seconds, ..., per_second or none".
inline std::string units_text() {
  std::string out;
  for (auto u : kUnits)
    if (!u.empty()) out += (out.empty() ? "" : ", ") + std::string(u);
  return out + " or none";
}

// The codes are the C ABI's KIWI_GAUGE, KIWI_COUNTER, KIWI_HISTOGRAM and KIWI_SUMMARY: a
// histogram's or summary's row is one series of its family (kiwi/plugin.h says which names).
enum class MetricKind : std::uint32_t {
  gauge = KIWI_GAUGE,
  counter = KIWI_COUNTER,
  histogram = KIWI_HISTOGRAM,
  summary = KIWI_SUMMARY
};

inline constexpr std::string_view kMetricKinds[] = {"gauge", "counter", "histogram", "summary"};

// "gauge", "counter", "histogram", "summary" (as /api/current, /metrics' TYPE and the docs say).
constexpr std::string_view to_string(MetricKind k) {
  const auto i = static_cast<std::uint32_t>(k);
  return i < std::size(kMetricKinds) ? kMetricKinds[i] : "unknown";
}
constexpr bool is_known_kind(MetricKind k) {
  return static_cast<std::uint32_t>(k) < std::size(kMetricKinds);
}
// A kind code the agent wrote (a handler's view, a stored series); one it does not know reads as
// a gauge.
constexpr MetricKind kind_from(std::uint32_t code) {
  const auto k = static_cast<MetricKind>(code);
  return is_known_kind(k) ? k : MetricKind::gauge;
}
constexpr std::optional<MetricKind> kind_from_string(std::string_view s) {
  for (std::uint32_t i = 0; i < std::size(kMetricKinds); ++i)
    if (kMetricKinds[i] == s) return static_cast<MetricKind>(i);
  return std::nullopt;
}

// One metric a sensor emits, declared once: its stable name, unit, kind, label names and meaning.
// The row is the HELP and TYPE of /metrics and the plugin's README table, and the sensor emits
// through it (MetricSink::emit(row, ...), kiwi/sensor.hpp), so the table and what is emitted
// cannot drift apart.
struct MetricSpec {
  std::string_view name;    // e.g. "cpu_core_usage_ratio"
  Unit unit;                // Unit::bytes, ..., Unit::none
  MetricKind kind;          // gauge, counter, histogram or summary
  std::string_view labels;  // label names, comma-separated, e.g. "core" ("" for none)
  std::string_view help;    // one line: what it measures and where it comes from
  // Counters only: the gauge the agent derives from this counter, its per-second rate between
  // two samples with the same labels, e.g. "network_receive_bytes_per_second" ("" for none).
  // Its unit is rate_unit(unit); it must be a gauge row of the same table, with the same labels.
  // The rate is the agent's job (counter resets, the clock, the first sample), not the sensor's.
  std::string_view rate = {};
};

// The unit of a counter's per-second rate: bytes -> bytes_per_second, seconds -> ratio (time
// busy per second, capped at 1), count or none -> per_second; nullopt for a unit no counter has.
inline constexpr std::optional<Unit> rate_unit(Unit counter_unit) {
  switch (counter_unit) {
    case Unit::bytes:
      return Unit::bytes_per_second;
    case Unit::seconds:
      return Unit::ratio;
    case Unit::count:
    case Unit::none:
      return Unit::per_second;
    default:
      return std::nullopt;
  }
}

// Rows spelled shorter: kiwi::gauge("cpu_core_usage_ratio", kiwi::Unit::ratio, "core", "..."),
// kiwi::counter("network_receive_bytes_total", kiwi::Unit::bytes, "interface", "...",
// "network_receive_bytes_per_second").
constexpr MetricSpec gauge(std::string_view name, Unit unit, std::string_view labels,
                           std::string_view help) {
  return {name, unit, MetricKind::gauge, labels, help};
}
constexpr MetricSpec counter(std::string_view name, Unit unit, std::string_view labels,
                             std::string_view help, std::string_view rate = {}) {
  return {name, unit, MetricKind::counter, labels, help, rate};
}

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
