#include "plugin/plugin_loader.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>
#include <boost/dll/import.hpp>
#include <boost/dll/runtime_symbol_info.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "base/duration.hpp"
#include "base/log.hpp"
#include "base/size.hpp"
#include "config/options.hpp"
#include "config/schema.hpp"
#include "plugin/c_handler.hpp"

namespace kiwi::agent {

namespace {

// The entry's options for the plugin `lib`; a default of the plugin's own table that does not fit
// is the plugin's fault (PluginError), not the configuration's.
Options options_of(const LoadedLibrary& lib, const PluginEntry& entry, const std::string& where,
                   std::span<const std::string_view> host_keys = {}) {
  try {
    return validate_options(*lib.info, entry.options, entry.pos.file, where, host_keys);
  } catch (const InvalidDefault& e) {
    throw PluginError(e.what());
  }
}

}  // namespace

std::string PluginLoader::resolve(PluginKind kind, const std::string& plugin) const {
  if (plugin.find('/') != std::string::npos) return plugin;
  const std::string file = plugin.ends_with(".so")
                               ? plugin
                               : "kiwi-" + std::string(to_string(kind)) + "-" + plugin + ".so";
  auto in = [&](const std::string& dir) {
    return std::filesystem::path(dir + "/" + file).lexically_normal().string();
  };
  std::error_code ec;
  if (!builtin_dir_.empty() && !std::filesystem::exists(in(plugin_dir_), ec) &&
      std::filesystem::exists(in(builtin_dir_), ec))
    return in(builtin_dir_);
  return in(plugin_dir_);
}

namespace {
// Why `file` cannot be a plugin before dlopen is asked, in words a user can act on; "" if it
// looks like a shared object.
std::string not_a_shared_object(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  char magic[4] = {};
  if (!in.read(magic, 4)) return "not a shared object (shorter than an ELF header)";
  if (std::memcmp(magic,
                  "\x7f"
                  "ELF",
                  4) != 0)
    return "not a shared object (no ELF header)";
  return {};
}
}  // namespace

FileIdentity FileIdentity::of(const struct stat& st) {
  return {st.st_dev, st.st_ino, st.st_size, st.st_mtim};
}

bool FileIdentity::operator==(const FileIdentity& o) const {
  return dev == o.dev && ino == o.ino && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
         mtime.tv_nsec == o.mtime.tv_nsec;
}

namespace {

// What this process has given to dlopen(), for all loaders and caches at once: the dynamic
// loader's list of loaded objects is one per process. glibc's dlopen() returns an object already
// loaded (a new reference to the old code, not the file's current one) when the name it is given
// matches a loaded object's name, or when the file's (st_dev, st_ino) matches a loaded object's.
// And glibc may keep an object loaded after its last dlclose(): one that is first to define an
// STB_GNU_UNIQUE symbol (a C++ inline static; the SDK's plugins have Boost.System's, which the
// agent defines first) is never unloaded.
// So, for a file as it is now:
//   1. an object loaded from it as it is now, still loaded: that object (by its name);
//   2. a path never given to dlopen(): dlopen(path), as always;
//   3. otherwise the file is opened and loaded as "/proc/self/fd/N", a name unique among loaded
//      objects while fd N stays open, and it stays open while the object is loaded;
//   4. unless the file's (st_dev, st_ino) is loaded (rewritten in place): then a copy of it in a
//      memfd (a new inode) is loaded that way.
// Each load is checked: the object dlopen() returned must carry the name it was given.
struct Name {
  FileIdentity file;                // the plugin file when it was loaded under this name
  std::pair<dev_t, ino_t> inode{};  // what glibc compares: the file's, or the memfd's
  int fd = -1;                      // the N of "/proc/self/fd/N"
  int users = 0;                    // LoadedLibrary objects holding it
};
struct Dl {
  std::mutex mutex;
  std::map<std::string, Name> names;  // every name this process has loaded a plugin by
};
Dl& dl() {
  static Dl& d = *new Dl;  // never destroyed: libraries may be unloaded during exit
  return d;
}

// The names (l_name) of the objects loaded now.
std::set<std::string> loaded_names() {
  std::set<std::string> out;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        if (info->dlpi_name) static_cast<std::set<std::string>*>(data)->insert(info->dlpi_name);
        return 0;
      },
      &out);
  return out;
}

// The name the dynamic loader knows `lib` by.
std::string name_of(boost::dll::shared_library& lib) {
  link_map* map = nullptr;
  if (::dlinfo(lib.native(), RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name) return {};
  return map->l_name;
}

std::string fd_path(int fd) {
  return "/proc/self/fd/" + std::to_string(fd);
}

// Copies `fd` from its start into a new memfd; -1 with errno on failure.
int copy_to_memfd(int fd, const std::string& file) {
  const std::string base = std::filesystem::path(file).filename().string();
  const int mem = ::memfd_create(("kiwi-plugin:" + base).c_str(), MFD_CLOEXEC);
  if (mem < 0) return -1;
  char buf[65536];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n == 0) return mem;
    if (n < 0 && errno == EINTR) continue;
    bool ok = n > 0;
    for (ssize_t done = 0; ok && done < n;) {
      const ssize_t w = ::write(mem, buf + done, static_cast<std::size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      ok = w > 0;
      if (ok) done += w;
    }
    if (!ok) {
      const int e = errno;
      ::close(mem);
      errno = e;
      return -1;
    }
    at += n;
  }
}

}  // namespace

struct LoadedLibrary::Code {
  boost::dll::shared_library library;
};

LoadedLibrary::LoadedLibrary() = default;

namespace {

// dlopen()s `name` into `lib.code`; "" on success, else the reason.
std::string dl_load(LoadedLibrary& lib, const std::string& name) {
  boost::system::error_code bec;
  ::dlerror();  // clear: Boost.DLL reports any dlopen failure as "Bad file descriptor"
  if (!lib.code) lib.code = std::make_unique<LoadedLibrary::Code>();
  lib.code->library.load(name, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local,
                         bec);
  if (!bec) return {};
  const char* why = ::dlerror();
  return why ? why : bec.message();
}

// Loads `file` as it is now into `lib` (identity, loaded_from, library). Throws PluginError
// ("<at>cannot load shared object: ...").
void load_fresh(LoadedLibrary& lib, const std::string& file, const std::string& at) {
  Dl& d = dl();
  std::lock_guard lock(d.mutex);
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  auto fail = [&](const std::string& why) {
    if (fd >= 0) ::close(fd);
    throw PluginError(at + "cannot load shared object: " + why);
  };
  if (fd < 0) fail(std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(std::strerror(errno));
  lib.identity = FileIdentity::of(st);
  // Loads `name`, known to `d` as `entry`; false (and nothing loaded) when dlopen() returned an
  // object of another name.
  auto load = [&](const std::string& name, Name entry) {
    if (auto why = dl_load(lib, name); !why.empty()) fail(why);
    if (name_of(lib.code->library) != name) {
      lib.code->library.unload();
      return false;
    }
    ++d.names.try_emplace(name, entry).first->second.users;
    lib.loaded_from = name;
    return true;
  };

  const std::set<std::string> loaded = loaded_names();
  for (auto& [name, entry] : d.names)  // 1
    if (entry.file == lib.identity && loaded.contains(name)) {
      const Name same = entry;
      if (load(name, same)) {
        ::close(fd);
        return;
      }
      break;
    }
  const std::pair inode{st.st_dev, st.st_ino};
  if (!d.names.contains(file)) {  // 2
    if (load(file, {lib.identity, inode})) {
      ::close(fd);
      return;
    }
    d.names.try_emplace(file, Name{lib.identity, inode});  // another object carries the name
  }
  bool resident = false;  // 4
  for (auto& name : loaded)
    if (auto it = d.names.find(name); it != d.names.end()) resident |= it->second.inode == inode;
  if (!resident) {  // 3
    if (load(fd_path(fd), {lib.identity, inode, fd})) return;
    // Another object took the name, so fd stays open for good (its number is never reused).
  }
  const int mem = copy_to_memfd(fd, file);
  const int e = errno;
  if (resident) ::close(fd);
  fd = -1;
  if (mem < 0) fail("cannot copy it into memory: " + std::string(std::strerror(e)));
  fd = mem;
  struct stat mst {};
  ::fstat(mem, &mst);
  if (load(fd_path(mem), {lib.identity, {mst.st_dev, mst.st_ino}, mem})) return;
  fail("the dynamic loader returned an older copy of it; restart the agent to load the new one");
}

}  // namespace

LoadedLibrary::~LoadedLibrary() {
  Dl& d = dl();
  std::lock_guard lock(d.mutex);
  if (code) code->library.unload();
  auto it = d.names.find(loaded_from);
  if (it == d.names.end() || --it->second.users > 0 || it->second.fd < 0) return;
  // The name stays taken while an object carries it (glibc may keep one it cannot unload).
  if (loaded_names().contains(loaded_from)) return;
  ::close(it->second.fd);
  d.names.erase(it);
}

std::shared_ptr<LoadedLibrary> LibraryCache::find(const std::string& file, const FileIdentity& id) {
  std::lock_guard lock(mutex_);
  auto it = libraries_.find(file);
  if (it == libraries_.end()) return nullptr;
  for (auto& weak : it->second)
    if (auto lib = weak.lock(); lib && lib->identity == id) return lib;
  return nullptr;
}

bool LibraryCache::loaded(const std::string& file) {
  std::lock_guard lock(mutex_);
  auto it = libraries_.find(file);
  if (it == libraries_.end()) return false;
  return std::any_of(it->second.begin(), it->second.end(),
                     [](auto& weak) { return !weak.expired(); });
}

void LibraryCache::add(const std::shared_ptr<LoadedLibrary>& lib) {
  std::lock_guard lock(mutex_);
  auto& list = libraries_[lib->file];
  std::erase_if(list, [](auto& weak) { return weak.expired(); });
  list.push_back(lib);
}

PluginLoader::PluginLoader(std::string plugin_dir, Logger& log, SourcePos plugin_dir_pos,
                           std::shared_ptr<LibraryCache> cache, std::string builtin_dir)
    : plugin_dir_(std::move(plugin_dir)),
      plugin_dir_pos_(std::move(plugin_dir_pos)),
      builtin_dir_(std::filesystem::path(builtin_dir).lexically_normal() ==
                           std::filesystem::path(plugin_dir_).lexically_normal()
                       ? std::string()
                       : std::move(builtin_dir)),
      log_(log),
      cache_(cache ? std::move(cache) : std::make_shared<LibraryCache>()) {}

PluginLoader::PluginLoader(const Config& cfg, Logger& log, std::shared_ptr<LibraryCache> cache)
    : PluginLoader(cfg.agent.plugin_dir, log, cfg.agent.plugin_dir_pos, std::move(cache),
                   cfg.agent.builtin_plugin_dir) {}

std::shared_ptr<LoadedLibrary> PluginLoader::open(std::optional<PluginKind> kind,
                                                  const PluginEntry& entry) {
  const PluginKind lookup = kind.value_or(PluginKind::sensor);  // names only: a path has no kind
  const std::string file = resolve(lookup, entry.plugin);
  const std::string at = entry.plugin_pos.str() + ": " + file + ": ";
  auto check_kind = [&](const LoadedLibrary& lib) {
    if (kind && lib.info->kind != *kind)
      throw PluginError(at + "is a " + std::string(to_string(lib.info->kind)) + " plugin, not a " +
                        std::string(to_string(*kind)) + " plugin");
  };
  struct stat st {};
  if (::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    if (auto lib = cache_->find(file, FileIdentity::of(st))) {
      check_kind(*lib);
      return lib;
    }
  }
  std::error_code ec;
  const bool in_plugin_dir = entry.plugin.find('/') == std::string::npos;
  if (in_plugin_dir && !std::filesystem::is_directory(plugin_dir_, ec)) {
    // Missing or not a directory; or unreadable (EACCES), which needs another fix.
    const bool unreadable =
        ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory;
    throw PluginError(
        (plugin_dir_pos_.file.empty() ? "" : plugin_dir_pos_.str() + ": ") +
        "agent.plugin_dir: \"" + plugin_dir_ + "\" " +
        (unreadable ? "cannot be read (" + ec.message() + ")" : "is not a directory") +
        ", so no plugin can be found there (" + std::string(to_string(lookup)) + " '" +
        entry.plugin + "' at " + entry.plugin_pos.str() + " needs " + file + ")");
  }
  if (!std::filesystem::is_regular_file(file, ec))
    throw PluginError(at + "plugin file not found" +
                      (in_plugin_dir
                           ? " (looked up '" + entry.plugin + "' in plugin_dir " + plugin_dir_ +
                                 (builtin_dir_.empty() ? "" : " and then in " + builtin_dir_) + ")"
                           : ""));
  if (auto why = not_a_shared_object(file); !why.empty()) throw PluginError(at + why);
  const bool changed = cache_->loaded(file);
  auto lib = std::make_shared<LoadedLibrary>();
  lib->file = file;
  load_fresh(*lib, file, at);
  if (changed)
    log_.debug(file + ": changed on disk since it was loaded; loaded anew from " +
               lib->loaded_from + " (instances of the old copy keep it until they go)");
  // The entry point first: nothing else in the file is used until its descriptor checks out.
  if (!lib->code->library.has(KIWI_PLUGIN_ENTRY)) {
    if (lib->code->library.has("kiwi_abi_version"))
      throw PluginError(at + "built for the C++ plugin ABI of kiwi-agent 0.2 and earlier (it " +
                        "exports kiwi_abi_version); rebuild it against this agent's SDK, which " +
                        "loads C ABI " + std::to_string(KIWI_ABI_MAJOR) + ".x");
    throw PluginError(at + "not a kiwi plugin (no " + KIWI_PLUGIN_ENTRY +
                      " symbol; use KIWI_SENSOR_PLUGIN or KIWI_HANDLER_PLUGIN, or export it " +
                      "from C as kiwi/plugin.h says)");
  }
  try {
    const auto entry_point = lib->code->library.get<const kiwi_plugin*()>(KIWI_PLUGIN_ENTRY);
    lib->descriptor = std::make_unique<Descriptor>(entry_point());
  } catch (const std::exception& e) {
    throw PluginError(at + e.what());
  }
  lib->info = &lib->descriptor->info;
  lib->abi_major = lib->descriptor->c->abi_major;
  lib->abi_minor = lib->descriptor->c->abi_minor;
  cache_->add(lib);
  check_kind(*lib);
  return lib;
}

PluginInstance<Sensor> PluginLoader::create_sensor(const PluginEntry& entry,
                                                   std::string_view procfs,
                                                   std::string_view sysfs) {
  PluginInstance<Sensor> inst;
  inst.library = open(PluginKind::sensor, entry);
  inst.options = options_of(*inst.library, entry, "sensor");
  inst.log = std::make_unique<PrefixLogger>(log_, "sensor " + entry.name);
  try {
    inst.object = std::make_unique<CSensor>(*inst.library->descriptor->c, inst.library, entry.name,
                                            procfs, sysfs, inst.options, *inst.log);
  } catch (const std::exception& e) {
    throw PluginError(entry.plugin_pos.str() + ": " + inst.library->file + ": sensor '" +
                      entry.name + "' refused to start: " + e.what());
  }
  if (!inst.object) throw PluginError(inst.library->file + ": factory returned no object");
  return inst;
}

PluginInstance<Handler> PluginLoader::create_handler(const PluginEntry& entry,
                                                     const DataSource& data,
                                                     std::string_view agent_version,
                                                     std::span<const agent::Peer> peers,
                                                     std::string_view host_name) {
  std::vector<kiwi::Peer> views;
  for (const agent::Peer& p : peers) {
    auto credential = [&](const char* key) {
      auto it = p.basic_auth.find(key);
      return it == p.basic_auth.end() ? std::string_view() : std::string_view(it->second);
    };
    views.push_back({p.name, p.url, p.timeout, p.bearer_token_file, credential("username"),
                     credential("password_file"), p.ca_file});
  }
  PluginInstance<Handler> inst;
  inst.library = open(PluginKind::handler, entry);
  inst.options = options_of(*inst.library, entry, "route");
  inst.log = std::make_unique<PrefixLogger>(log_, "route " + entry.path);
  try {
    // The handler holds the library too: every body it returns keeps it, so the plugin's
    // release() can run after the instance, the route and the router are gone.
    inst.object =
        std::make_unique<CHandler>(*inst.library->descriptor->c, inst.library, entry.path,
                                   inst.options, *inst.log, data, agent_version, host_name, views);
  } catch (const std::exception& e) {
    throw PluginError(entry.plugin_pos.str() + ": " + inst.library->file + ": handler for '" +
                      entry.path + "' refused to start: " + e.what());
  }
  return inst;
}

template <class Object, class CObject>
PluginInstance<Object> PluginLoader::create_pusher(PluginKind kind, const std::string& table,
                                                   const PluginEntry& entry,
                                                   std::string_view host_name,
                                                   std::string_view agent_version) {
  PluginInstance<Object> inst;
  inst.library = open(kind, entry);
  if (entry.options_flat) {
    // The agent's keys beside the plugin's in the entry's table: "<table>.<key>".
    std::vector<std::string_view> host_keys;
    for (auto& row : host_entry(table).rows)
      if (!row.plugin_options) host_keys.push_back(row.spec.key);
    inst.options = options_of(*inst.library, entry, table + ".", host_keys);
  } else {
    inst.options = options_of(*inst.library, entry, table);
  }
  inst.log = std::make_unique<PrefixLogger>(log_, table + " " + entry.name);
  try {
    inst.object = std::make_unique<CObject>(*inst.library->descriptor->c, inst.library, entry.name,
                                            host_name, agent_version, inst.options, *inst.log);
  } catch (const std::exception& e) {
    throw PluginError(entry.pos.str() + ": " + inst.library->file + ": " + table + " '" +
                      entry.name + "' refused to start: " + e.what());
  }
  return inst;
}

PluginInstance<Output> PluginLoader::create_output(const PluginEntry& entry,
                                                   std::string_view host_name,
                                                   std::string_view agent_version) {
  return create_pusher<Output, COutput>(PluginKind::output,
                                        entry.table.empty() ? "remote_write" : entry.table, entry,
                                        host_name, agent_version);
}

PluginInstance<Notifier> PluginLoader::create_notifier(const PluginEntry& entry,
                                                       std::string_view host_name,
                                                       std::string_view agent_version) {
  return create_pusher<Notifier, CNotifier>(PluginKind::notifier, "notify", entry, host_name,
                                            agent_version);
}

std::string describe_plugin(const LoadedLibrary& lib) {
  std::ostringstream out;
  out << lib.info->name << " (" << to_string(lib.info->kind) << " plugin, ABI " << lib.abi_major
      << "." << lib.abi_minor << ")\n  " << lib.info->description << "\n  file: " << lib.file
      << "\n";
  if (lib.info->options.empty()) out << "  options: none\n";
  if (!lib.info->options.empty()) out << "  options:\n";
  for (auto& o : lib.info->options)
    out << "    " << o.key << " (" << option_type_text(o) << ", default " << o.default_toml
        << (o.has_range ? ", " + option_range_text(o) : "") << ")\n      " << o.description << "\n";
  if (!lib.info->metrics.empty()) out << "  metrics:\n";
  for (auto& m : lib.info->metrics)
    out << "    " << m.name << (m.labels.empty() ? "" : "{" + std::string(m.labels) + "}") << " ("
        << to_string(m.kind) << (m.unit == Unit::none ? "" : ", " + std::string(to_string(m.unit)))
        << ")\n      " << m.help << "\n";
  return out.str();
}

std::string program_directory() {
  return boost::dll::program_location().parent_path().string();
}

}  // namespace kiwi::agent
