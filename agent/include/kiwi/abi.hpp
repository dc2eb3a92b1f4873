// kiwi-agent plugin SDK: the C++ side of the C ABI (kiwi/plugin.h), header-only. This is what
// KIWI_SENSOR_PLUGIN and KIWI_HANDLER_PLUGIN expand to: the plugin's C++ tables and classes made
// into a kiwi_plugin descriptor and C functions. Plugin code does not call it.
//
// Exceptions never cross the boundary: a constructor that throws is a refusal with its what(), a
// sample() that throws is KIWI_SAMPLE_ERROR with its what().
#pragma once

#include <kiwi/plugin.h>

#include <chrono>
#include <exception>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiwi/plugin.hpp"
#include "kiwi/views.hpp"

namespace kiwi::abi {

// The C++ enums are the C ABI's codes, so they cross as they are.
static_assert(static_cast<std::uint32_t>(OptionType::boolean) == KIWI_OPTION_BOOLEAN &&
              static_cast<std::uint32_t>(OptionType::string_list) == KIWI_OPTION_STRING_LIST &&
              static_cast<std::uint32_t>(OptionType::duration) == KIWI_OPTION_DURATION &&
              static_cast<std::uint32_t>(OptionType::size) == KIWI_OPTION_SIZE &&
              static_cast<std::uint32_t>(OptionType::string_table) == KIWI_OPTION_STRING_TABLE);
static_assert(static_cast<std::uint32_t>(LogLevel::error) == KIWI_LOG_ERROR &&
              static_cast<std::uint32_t>(LogLevel::debug) == KIWI_LOG_DEBUG);
static_assert(static_cast<std::uint32_t>(PluginKind::sensor) == KIWI_KIND_SENSOR &&
              static_cast<std::uint32_t>(PluginKind::handler) == KIWI_KIND_HANDLER &&
              static_cast<std::uint32_t>(PluginKind::output) == KIWI_KIND_OUTPUT &&
              static_cast<std::uint32_t>(PluginKind::notifier) == KIWI_KIND_NOTIFIER);

// The agent's logger for one instance.
class HostLogger final : public Logger {
 public:
  explicit HostLogger(const kiwi_host* host) : host_(host) {}
  void log(LogLevel level, std::string_view message) override {
    host_->log(host_->ctx, static_cast<std::uint32_t>(level), str(message));
  }

 private:
  const kiwi_host* host_;
};

// Calls `fn`, turning an exception into a refusal; nullptr then.
template <class Fn>
void* refusing(const kiwi_refusal* refusal, Fn&& fn) noexcept {
  try {
    return fn();
  } catch (const std::exception& e) {
    refusal->refuse(refusal->ctx, str(e.what()));
  } catch (...) {
    refusal->refuse(refusal->ctx, str("an exception that is not a std::exception"));
  }
  return nullptr;
}

// The functions of a descriptor, for its kind.
struct Functions {
  decltype(kiwi_plugin::sensor_create) sensor_create = nullptr;
  decltype(kiwi_plugin::sensor_sample) sensor_sample = nullptr;
  decltype(kiwi_plugin::handler_create) handler_create = nullptr;
  decltype(kiwi_plugin::handler_handle) handler_handle = nullptr;
  decltype(kiwi_plugin::handler_methods) handler_methods = nullptr;
  decltype(kiwi_plugin::destroy) destroy = nullptr;
  decltype(kiwi_plugin::output_create) output_create = nullptr;
  decltype(kiwi_plugin::output_write) output_write = nullptr;
  decltype(kiwi_plugin::notifier_create) notifier_create = nullptr;
  decltype(kiwi_plugin::notifier_send) notifier_send = nullptr;
};

// The descriptor of a plugin, built once, on the first call to kiwi_plugin_v1() (at load).
struct Descriptor {
  std::vector<kiwi_option_spec> options;
  std::vector<kiwi_metric_spec> metrics;
  kiwi_plugin plugin{};

  Descriptor(PluginKind kind, std::string_view name, std::string_view description,
             std::span<const OptionSpec> option_table, std::span<const MetricSpec> metric_table,
             const Functions& fn) {
    for (const auto& o : option_table) options.push_back(option_row(o));
    for (const auto& m : metric_table) metrics.push_back(metric_row(m));
    plugin.abi_major = KIWI_ABI_MAJOR;
    plugin.abi_minor = KIWI_ABI_MINOR;
    plugin.size = sizeof(kiwi_plugin);
    plugin.kind = static_cast<std::uint32_t>(kind);
    plugin.name = str(name);
    plugin.description = str(description);
    plugin.options = options.data();
    plugin.option_count = options.size();
    plugin.option_spec_size = sizeof(kiwi_option_spec);
    plugin.metrics = metrics.data();
    plugin.metric_count = metrics.size();
    plugin.metric_spec_size = sizeof(kiwi_metric_spec);
    plugin.sensor_create = fn.sensor_create;
    plugin.sensor_sample = fn.sensor_sample;
    plugin.handler_create = fn.handler_create;
    plugin.handler_handle = fn.handler_handle;
    plugin.handler_methods = fn.handler_methods;
    plugin.destroy = fn.destroy;
    plugin.output_create = fn.output_create;
    plugin.output_write = fn.output_write;
    plugin.notifier_create = fn.notifier_create;
    plugin.notifier_send = fn.notifier_send;
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
};

inline std::chrono::steady_clock::time_point deadline_of(std::int64_t ns) {
  if (ns == std::numeric_limits<std::int64_t>::max())
    return std::chrono::steady_clock::time_point::max();
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
}

}  // namespace kiwi::abi
