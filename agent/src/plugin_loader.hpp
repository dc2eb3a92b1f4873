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
#include <optional>

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

// One plugin object and everything it may use during its life, its destructor included: the code
// (library), its logger and its options. Members are destroyed in reverse order of declaration,
// so `object` is declared last; the destructor also resets it first, explicitly, so a reordering
// of the members cannot make a plugin's destructor use a freed logger or unloaded code.
template <class T>
struct PluginInstance {
  std::shared_ptr<LoadedLibrary> library;
  std::unique_ptr<PrefixLogger> log;  // per-instance prefixing logger, referenced by the object
  Options options;                    // referenced by the object (SensorContext::options)
  std::unique_ptr<T> object;

  PluginInstance() = default;
  PluginInstance(PluginInstance&&) noexcept = default;
  PluginInstance& operator=(PluginInstance&& other) noexcept {
    object.reset();  // the old object goes before what it uses
    library = std::move(other.library);
    log = std::move(other.log);
    options = std::move(other.options);
    object = std::move(other.object);
    return *this;
  }
  ~PluginInstance() { object.reset(); }
};

class PluginLoader {
 public:
  // `plugin_dir_pos`: where plugin_dir was set, named when a plugin is not found there.
  PluginLoader(std::string plugin_dir, Logger& log, SourcePos plugin_dir_pos = {})
      : plugin_dir_(std::move(plugin_dir)), plugin_dir_pos_(std::move(plugin_dir_pos)), log_(log) {}

  // "cpu" -> <plugin_dir>/kiwi-sensor-cpu.so; a file name ("kiwi-sensor-cpu.so") is looked up in
  // plugin_dir too; anything with a '/' is a path (relative ones to the working directory).
  std::string resolve(PluginKind kind, const std::string& plugin) const;
  // Opens (once per file) and checks ABI version, descriptor and kind.
  // `kind` nullopt: a file given by path, of either kind (for --describe-plugin).
  std::shared_ptr<LoadedLibrary> open(std::optional<PluginKind> kind, const PluginEntry& entry);

  PluginInstance<Sensor> create_sensor(const PluginEntry& entry, std::string_view procfs,
                                       std::string_view sysfs);
  PluginInstance<Handler> create_handler(const PluginEntry& entry, const DataSource& data,
                                         std::string_view agent_version);

 private:
  std::string plugin_dir_;
  SourcePos plugin_dir_pos_;
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
