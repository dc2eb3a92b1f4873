// Loads plugin shared objects with Boost.DLL and creates plugin instances from config entries.
//
// Every object a plugin creates is held next to a reference to its library, declared so that the
// object is destroyed first: a plugin object never outlives its code.
#pragma once

#include <boost/dll/shared_library.hpp>
#include <kiwi/handler.hpp>
#include <kiwi/sensor.hpp>
#include <map>
#include <memory>

#include "config.hpp"
#include "log.hpp"

namespace kiwi::agent {

// A plugin that cannot be used: missing file, not a kiwi plugin, wrong ABI, wrong kind, a bad
// option or a factory that threw. what() names the file and the reason; exit code 2.
struct PluginError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct LoadedLibrary {
  std::string file;  // resolved path
  std::uint32_t abi_version = 0;
  const PluginInfo* info = nullptr;
  boost::dll::shared_library library;
};

template <class T>
struct PluginInstance {
  std::shared_ptr<LoadedLibrary> library;  // declared first: destroyed last
  std::unique_ptr<T> object;
  std::unique_ptr<PrefixLogger> log;  // per-instance prefixing logger, referenced by the object
  Options options;
};

class PluginLoader {
 public:
  PluginLoader(std::string plugin_dir, Logger& log) : plugin_dir_(std::move(plugin_dir)), log_(log) {}

  // "cpu" -> <plugin_dir>/kiwi-sensor-cpu.so; anything with a '/' or ending in ".so" is a path.
  std::string resolve(PluginKind kind, const std::string& plugin) const;
  // Opens (once per file) and checks ABI version, descriptor and kind.
  std::shared_ptr<LoadedLibrary> open(PluginKind kind, const PluginEntry& entry);

  PluginInstance<Sensor> create_sensor(const PluginEntry& entry, std::string_view procfs,
                                       std::string_view sysfs);
  PluginInstance<Handler> create_handler(const PluginEntry& entry, const DataSource& data,
                                         std::string_view agent_version);

 private:
  std::string plugin_dir_;
  Logger& log_;
  std::map<std::string, std::shared_ptr<LoadedLibrary>> libraries_;
};

// Checks a TOML options table against a plugin's option table and fills in the defaults.
// Throws ConfigError at the offending key (file:line:col).
Options validate_options(const PluginInfo& info, const toml::table* given, const std::string& file,
                         const std::string& where);

// The option table as text, for `kiwi-agent --describe-plugin NAME`.
std::string describe_plugin(const LoadedLibrary& lib);

}  // namespace kiwi::agent
