// The host's side of the C plugin ABI (kiwi/plugin.h): checking a descriptor, the C views of
// options and of the logger it hands to a plugin, and the adapters that make a C sensor a
// kiwi::Sensor for the collector, a C output a kiwi::Output and a C notifier a kiwi::Notifier. The
// handler adapter is in c_handler.hpp.
//
// Everything the host passes in is built here and lives in the adapter next to the instance, so
// it outlives every call the plugin may make. The C views themselves, and their reading back, are
// the SDK's (kiwi/views.hpp), the same code the plugin's side uses.
#pragma once

#include <kiwi/plugin.h>

#include <kiwi/notifier.hpp>
#include <kiwi/output.hpp>
#include <kiwi/plugin.hpp>
#include <kiwi/sensor.hpp>
#include <kiwi/views.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace kiwi::agent {

inline kiwi_str to_c(std::string_view s) {
  return {s.data(), s.size()};
}
inline std::string_view from_c(kiwi_str s) {
  return s.size ? std::string_view(s.data, s.size) : std::string_view();
}

// What a descriptor says, read as this agent knows it (rows stepped through by the plugin's row
// sizes, members beyond what this agent knows ignored), as host types that point into the
// plugin's static tables. Throws std::runtime_error with the reason the descriptor is unusable.
// A counter's `rate` names a gauge row of the same table, in the counter's rate unit and with
// its labels, so the derived gauge has a HELP text and a README row like every other metric.
// Throws std::runtime_error naming the counter; the loader refuses the plugin with it.
void check_rates(const std::vector<MetricSpec>& table);
// Every row's unit is one this agent knows: a plugin of a later minor version may declare a unit
// added since (kiwi/plugin.h, "Units"). Throws std::runtime_error naming the row, its unit code,
// this agent's units and the plugin's ABI version (`plugin_minor`); the loader refuses the plugin
// with it, rather than dropping that metric's values at every sample.
void check_units(const std::vector<MetricSpec>& table, std::uint32_t plugin_minor);

struct Descriptor {
  const kiwi_plugin* c = nullptr;
  PluginInfo info{};
  std::vector<OptionSpec> options;
  std::vector<MetricSpec> metrics;

  explicit Descriptor(const kiwi_plugin* plugin);
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
};

// A logger and the instance's library as a kiwi_host. Lives as long as the instance it is handed
// to; `code` is what keep_loaded() keeps forever (the instance's LoadedLibrary).
struct CHost {
  CHost(Logger& log, std::shared_ptr<const void> code);
  Logger& log;
  std::shared_ptr<const void> code;
  std::once_flag kept;
  kiwi_host host{};
};

// Keeps `code` (a LoadedLibrary, or what holds one) for the rest of the process: never released,
// so the library is never unloaded. The one place the agent gives up unloading code: kiwi_host's
// keep_loaded(), and sensors the collector abandons. Reachable from a static, so a leak checker
// sees it as kept. Thread-safe.
void keep_forever(std::shared_ptr<const void> code);

// The validated options as kiwi_option_value rows; points into `options`, which must outlive it.
using COptions = abi::OptionValuesView;

// A C refusal that keeps the message.
struct CRefusal {
  CRefusal();
  // What a create function returned; throws std::runtime_error with the message when it is null.
  void* created(void* instance) const;
  std::string message;
  kiwi_refusal c{};
};

// A sensor instance of a C-ABI plugin, as the collector sees sensors. Its destructor calls the
// plugin's destroy().
class CSensor final : public Sensor {
 public:
  // Calls sensor_create; throws std::runtime_error with the plugin's refusal.
  // `code` keeps the plugin's library (kiwi_host.keep_loaded keeps it forever).
  CSensor(const kiwi_plugin& plugin, std::shared_ptr<const void> code,
          std::string_view instance_name, std::string_view procfs, std::string_view sysfs,
          const Options& options, Logger& log);
  ~CSensor() override;
  SampleResult sample(MetricSink& sink) override;

 private:
  const kiwi_plugin& plugin_;
  CHost host_;
  COptions options_;
  void* instance_ = nullptr;
};

// An output instance of a C-ABI plugin, as the agent's output threads see outputs. Its destructor
// calls the plugin's destroy().
class COutput final : public Output {
 public:
  // Calls output_create; throws std::runtime_error with the plugin's refusal.
  COutput(const kiwi_plugin& plugin, std::shared_ptr<const void> code,
          std::string_view instance_name, std::string_view host_name,
          std::string_view agent_version, const Options& options, Logger& log);
  ~COutput() override;
  WriteResult write(const OutputBatch& batch) override;

 private:
  const kiwi_plugin& plugin_;
  CHost host_;
  COptions options_;
  void* instance_ = nullptr;
};

// A notifier instance of a C-ABI plugin, as the agent's notify runners see notifiers. Its
// destructor calls the plugin's destroy().
class CNotifier final : public Notifier {
 public:
  // Calls notifier_create; throws std::runtime_error with the plugin's refusal.
  CNotifier(const kiwi_plugin& plugin, std::shared_ptr<const void> code,
            std::string_view instance_name, std::string_view host_name,
            std::string_view agent_version, const Options& options, Logger& log);
  ~CNotifier() override;
  WriteResult send(const Notification& notification) override;

 private:
  const kiwi_plugin& plugin_;
  CHost host_;
  COptions options_;
  void* instance_ = nullptr;
};

}  // namespace kiwi::agent
