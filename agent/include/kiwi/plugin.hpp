// kiwi-agent plugin SDK: what every plugin shares (ABI version, options, logging, descriptor).
//
// A plugin is a shared object that includes only headers from agent/include/kiwi/ and exports,
// through KIWI_SENSOR_PLUGIN or KIWI_HANDLER_PLUGIN (sensor.hpp, handler.hpp):
//   kiwi_abi_version   extern "C" const std::uint32_t   checked by the loader before anything else
//   kiwi_plugin_info   Boost.DLL alias, const PluginInfo& ()  name, kind, option table
//   kiwi_create        Boost.DLL alias, the factory          called once per [[sensor]] / [[route]]
//
// ABI rule: SDK types are plain (string_view, string, vector, span, small structs). No toml++,
// RapidJSON or libmicrohttpd type crosses the boundary. Any change to a type in this directory
// that changes its layout or a virtual table bumps KIWI_ABI_VERSION.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#define KIWI_ABI_VERSION 4u

#define KIWI_EXPORT __attribute__((visibility("default")))

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

// One metric a sensor emits: its stable name, unit, labels and meaning. The table drives the
// Prometheus HELP/TYPE lines and the plugin's README; emitting a name not in it is allowed (it gets
// a generic HELP) but is a bug worth a test.
struct MetricSpec {
  std::string_view name;    // e.g. "cpu_core_usage_ratio"
  std::string_view unit;    // one of kiwi::kUnits (sensor.hpp): bytes, seconds, ..., ""
  bool counter;             // false: gauge
  std::string_view labels;  // comma list, e.g. "core" ("" for none)
  std::string_view help;    // one line: what it measures and where it comes from
};

// For handlers, and sensors whose metrics are not known in advance.
inline constexpr std::span<const MetricSpec> no_metrics{};

// What a plugin says about itself. Returned by reference from static storage inside the plugin.
struct PluginInfo {
  PluginKind kind;
  std::string_view name;         // default lookup name, e.g. "cpu" -> kiwi-sensor-cpu.so
  std::string_view description;  // one line
  std::span<const OptionSpec> options;
  std::span<const MetricSpec> metrics;  // sensors: everything they may emit; handlers: none
};

}  // namespace kiwi

// Internal to the two plugin macros: the ABI version symbol and the descriptor alias.
#define KIWI_DETAIL_EXPORT_COMMON(info_var)                                       \
  extern "C" KIWI_EXPORT const std::uint32_t kiwi_abi_version = KIWI_ABI_VERSION; \
  namespace kiwi_plugin_detail {                                                  \
  const ::kiwi::PluginInfo& plugin_info() {                                       \
    return info_var;                                                              \
  }                                                                               \
  }                                                                               \
  BOOST_DLL_ALIAS(kiwi_plugin_detail::plugin_info, kiwi_plugin_info)
