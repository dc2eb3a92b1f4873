// Loads plugin shared objects with Boost.DLL, reads their C ABI descriptor (kiwi/plugin.h,
// c_abi.hpp) and creates plugin instances from config entries.
//
// Every object a plugin creates is held next to a reference to its library, declared so that the
// object is destroyed first: a plugin object never outlives its code.
#pragma once

#include <sys/stat.h>
#include <kiwi/handler.hpp>
#include <kiwi/notifier.hpp>
#include <kiwi/output.hpp>
#include <kiwi/sensor.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "base/log.hpp"
#include "config/config.hpp"
#include "plugin/c_abi.hpp"

namespace kiwi::agent {

// A plugin that cannot be used: missing file, not a kiwi plugin, wrong ABI, wrong kind, a bad
// option or a factory that threw. what() names the file and the reason; exit code 2.
struct PluginError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What a file was when it was loaded: a file replaced on disk (a new inode) or rewritten in place
// (a new size or modification time) is another plugin, and is loaded anew.
struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  timespec mtime{};
  static FileIdentity of(const struct stat& st);
  bool operator==(const FileIdentity& o) const;
};

// One loaded shared object. Its destructor unloads the code first, then closes the file
// descriptor the dynamic loader knows it by, if any (see load_fresh() in plugin_loader.cpp).
struct LoadedLibrary {
  std::string file;         // resolved path (shown in /api/plugins)
  std::string loaded_from;  // what dlopen() was given: `file`, or "/proc/self/fd/N" for a reload
  FileIdentity identity;    // of `file` when it was loaded
  struct Code;              // the Boost.DLL library (plugin_loader.cpp)
  std::unique_ptr<Code> code;
  // What kiwi_plugin_v1() returned, as this agent reads it; points into the library.
  std::unique_ptr<Descriptor> descriptor;
  const PluginInfo* info = nullptr;  // &descriptor->info
  std::uint32_t abi_major = 0;       // the C ABI version it was built for
  std::uint32_t abi_minor = 0;

  LoadedLibrary();
  LoadedLibrary(const LoadedLibrary&) = delete;
  LoadedLibrary& operator=(const LoadedLibrary&) = delete;
  ~LoadedLibrary();
};

// The libraries loaded so far, shared by the PluginLoader of the running configuration and the
// one a reload builds beside it, so an unchanged plugin file is not loaded twice. It holds weak
// references: a library no plugin instance uses any more is unloaded. Thread-safe.
class LibraryCache {
 public:
  // A live library loaded from `file` when it had `id`; null if none.
  std::shared_ptr<LoadedLibrary> find(const std::string& file, const FileIdentity& id);
  // Whether some live library was loaded from `file` (of whatever identity).
  bool loaded(const std::string& file);
  void add(const std::shared_ptr<LoadedLibrary>& lib);

 private:
  std::mutex mutex_;
  std::map<std::string, std::vector<std::weak_ptr<LoadedLibrary>>> libraries_;
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
  // `cache`: the libraries to reuse (a reload passes the running loader's cache()); a new, empty
  // one when null. `builtin_dir`: the agent's own plugin directory (the built-in plugin_dir),
  // searched after plugin_dir, so a plugin_dir of one's own adds to the agent's plugins instead
  // of hiding them; "" or plugin_dir itself: none.
  PluginLoader(std::string plugin_dir, Logger& log, SourcePos plugin_dir_pos = {},
               std::shared_ptr<LibraryCache> cache = {}, std::string builtin_dir = {});
  // The loader of `cfg`: its plugin_dir (and where it was set), then the built-in one.
  PluginLoader(const Config& cfg, Logger& log, std::shared_ptr<LibraryCache> cache = {});

  // "cpu" -> <plugin_dir>/kiwi-sensor-cpu.so (kiwi-<kind>-<name>.so), or
  // <builtin_dir>/kiwi-sensor-cpu.so when only that exists; a file name ("kiwi-sensor-cpu.so") is
  // looked up the same way; anything with a '/' is a path (relative ones to the working directory).
  std::string resolve(PluginKind kind, const std::string& plugin) const;
  // Opens and checks ABI version, descriptor and kind. A file still as it was when a live
  // library in the cache was loaded from it gives that library; a file replaced or rewritten
  // since is loaded anew, beside the old library, which keeps serving the instances holding it.
  // `kind` nullopt: a file given by path, of either kind (for --describe-plugin).
  std::shared_ptr<LoadedLibrary> open(std::optional<PluginKind> kind, const PluginEntry& entry);

  PluginInstance<Sensor> create_sensor(const PluginEntry& entry, std::string_view procfs,
                                       std::string_view sysfs);
  // `peers`: the [[peer]] entries every handler is told of (ABI 1.8), with this board's name.
  PluginInstance<Handler> create_handler(const PluginEntry& entry, const DataSource& data,
                                         std::string_view agent_version,
                                         std::span<const agent::Peer> peers = {},
                                         std::string_view host_name = {});
  // A [[remote_write]] entry: its options = {...}, or (options_flat) its table's keys other than
  // the agent's (config/schema.hpp).
  PluginInstance<Output> create_output(const PluginEntry& entry, std::string_view host_name,
                                       std::string_view agent_version);
  // A [[notify]] entry's plugin, its `kind` (looked up as kiwi-notifier-<kind>.so): its options
  // are `options = {...}`, or (options_flat, [[notify]]'s own shape) its table's keys other than
  // the agent's (config/schema.hpp), named "notify.<key>" in errors.
  PluginInstance<Notifier> create_notifier(const PluginEntry& entry, std::string_view host_name,
                                           std::string_view agent_version);

  std::shared_ptr<LibraryCache> cache() const { return cache_; }

 private:
  // An output's or a notifier's instance (`CObject`: COutput, CNotifier) for an entry of the
  // agent's `table` ("remote_write", "notify"), its options in either shape, named
  // "<table>.options.<key>" or, flat, "<table>.<key>".
  template <class Object, class CObject>
  PluginInstance<Object> create_pusher(PluginKind kind, const std::string& table,
                                       const PluginEntry& entry, std::string_view host_name,
                                       std::string_view agent_version);

  std::string plugin_dir_;
  SourcePos plugin_dir_pos_;
  std::string builtin_dir_;  // "" when it is plugin_dir_
  Logger& log_;
  std::shared_ptr<LibraryCache> cache_;
};

// The directory of the running executable: what "$ORIGIN" in a configured path stands for.
std::string program_directory();

// The option table as text, for `kiwi-agent --describe-plugin NAME`.
std::string describe_plugin(const LoadedLibrary& lib);

}  // namespace kiwi::agent
