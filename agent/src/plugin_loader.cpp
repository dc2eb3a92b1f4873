#include "plugin_loader.hpp"

#include <dlfcn.h>
#include <boost/dll/import.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "log.hpp"

namespace kiwi::agent {

namespace {

std::string_view type_name(OptionType t) {
  switch (t) {
    case OptionType::boolean:
      return "boolean";
    case OptionType::integer:
      return "integer";
    case OptionType::number:
      return "number";
    case OptionType::string:
      return "string";
    case OptionType::string_list:
      return "list of strings";
  }
  return "?";
}

std::string_view expected(OptionType t) {
  switch (t) {
    case OptionType::boolean:
      return "a boolean (true or false)";
    case OptionType::integer:
      return "an integer";
    case OptionType::number:
      return "a number";
    case OptionType::string:
      return "a string";
    case OptionType::string_list:
      return "a list of strings, e.g. [\"a\", \"b\"]";
  }
  return "?";
}

// Converts a TOML node to an OptionValue of `spec`'s type; nullopt if the type does not fit.
std::optional<OptionValue> convert(const OptionSpec& spec, const toml::node& node) {
  OptionValue v;
  v.key = std::string(spec.key);
  v.type = spec.type;
  switch (spec.type) {
    case OptionType::boolean:
      if (!node.is_boolean()) return std::nullopt;
      v.boolean = *node.value<bool>();
      break;
    case OptionType::integer:
      if (!node.is_integer()) return std::nullopt;
      v.integer = *node.value<std::int64_t>();
      break;
    case OptionType::number:
      if (!node.is_number()) return std::nullopt;
      v.number = *node.value<double>();
      break;
    case OptionType::string:
      if (!node.is_string()) return std::nullopt;
      v.string = *node.value<std::string>();
      break;
    case OptionType::string_list:
      if (!node.is_array() || !node.as_array()->is_homogeneous(toml::node_type::string)) {
        if (!(node.is_array() && node.as_array()->empty())) return std::nullopt;
      }
      for (auto& item : *node.as_array()) v.string_list.push_back(*item.value<std::string>());
      break;
  }
  return v;
}

}  // namespace

Options validate_options(const PluginInfo& info, const toml::table* given_or_null,
                         const std::string& file, const std::string& where) {
  static const toml::table none;
  const toml::table& given = given_or_null ? *given_or_null : none;
  for (auto& [key, node] : given) {
    bool known = false;
    for (auto& spec : info.options) known |= spec.key == key.str();
    if (!known) {
      std::string accepted;
      for (auto& spec : info.options)
        accepted += (accepted.empty() ? "" : ", ") + std::string(spec.key);
      throw ConfigError(
          SourcePos{file, key.source().begin.line, key.source().begin.column},
          where + ".options." + std::string(key.str()),
          "unknown option for plugin " + std::string(info.name) +
              (accepted.empty() ? "; it takes no options" : "; accepted: " + accepted));
    }
  }
  std::vector<OptionValue> values;
  for (auto& spec : info.options) {
    if (const toml::node* node = given.get(spec.key)) {
      auto v = convert(spec, *node);
      if (!v)
        throw ConfigError(SourcePos{file, node->source().begin.line, node->source().begin.column},
                          where + ".options." + std::string(spec.key),
                          "expected " + std::string(expected(spec.type)));
      values.push_back(std::move(*v));
      continue;
    }
    // The default, as the plugin declared it (a TOML literal).
    toml::table parsed;
    try {
      parsed = toml::parse("v = " + std::string(spec.default_toml));
    } catch (const toml::parse_error&) {
    }
    auto* node = parsed.get("v");
    auto v = node ? convert(spec, *node) : std::nullopt;
    if (!v)
      throw PluginError("plugin " + std::string(info.name) + ": option '" + std::string(spec.key) +
                        "' has an invalid default '" + std::string(spec.default_toml) + "'");
    values.push_back(std::move(*v));
  }
  return Options(std::move(values));
}

std::string PluginLoader::resolve(PluginKind kind, const std::string& plugin) const {
  if (plugin.find('/') != std::string::npos) return plugin;
  const std::string file = plugin.ends_with(".so")
                               ? plugin
                               : "kiwi-" + std::string(to_string(kind)) + "-" + plugin + ".so";
  return std::filesystem::path(plugin_dir_ + "/" + file).lexically_normal().string();
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

std::shared_ptr<LoadedLibrary> PluginLoader::open(std::optional<PluginKind> kind,
                                                  const PluginEntry& entry) {
  const PluginKind lookup = kind.value_or(PluginKind::sensor);  // names only: a path has no kind
  const std::string file = resolve(lookup, entry.plugin);
  const std::string at = entry.plugin_pos.str() + ": " + file + ": ";
  auto cached = libraries_.find(file);
  std::shared_ptr<LoadedLibrary> lib;
  if (cached != libraries_.end()) {
    lib = cached->second;
  } else {
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
      throw PluginError(
          at + "plugin file not found" +
          (in_plugin_dir ? " (looked up '" + entry.plugin + "' in plugin_dir " + plugin_dir_ + ")"
                         : ""));
    if (auto why = not_a_shared_object(file); !why.empty()) throw PluginError(at + why);
    lib = std::make_shared<LoadedLibrary>();
    lib->file = file;
    boost::system::error_code bec;
    ::dlerror();  // clear: Boost.DLL reports any dlopen failure as "Bad file descriptor"
    lib->library.load(file, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local,
                      bec);
    if (bec) {
      const char* why = ::dlerror();
      throw PluginError(at + "cannot load shared object: " + (why ? why : bec.message()));
    }
    // The ABI version comes first: nothing else in the file is trusted until it matches.
    if (!lib->library.has("kiwi_abi_version"))
      throw PluginError(at + "not a kiwi plugin (no kiwi_abi_version symbol)");
    lib->abi_version = lib->library.get<const std::uint32_t>("kiwi_abi_version");
    if (lib->abi_version != KIWI_ABI_VERSION)
      throw PluginError(at + "plugin ABI version " + std::to_string(lib->abi_version) +
                        ", this agent expects " + std::to_string(KIWI_ABI_VERSION) +
                        "; rebuild the plugin against this agent's SDK");
    if (!lib->library.has("kiwi_plugin_info") || !lib->library.has("kiwi_create"))
      throw PluginError(at + "not a kiwi plugin (no kiwi_plugin_info/kiwi_create; use KIWI_" +
                        "SENSOR_PLUGIN or KIWI_HANDLER_PLUGIN)");
    lib->info = &lib->library.get_alias<const PluginInfo&()>("kiwi_plugin_info")();
    libraries_.emplace(file, lib);
  }
  if (kind && lib->info->kind != *kind)
    throw PluginError(at + "is a " + std::string(to_string(lib->info->kind)) + " plugin, not a " +
                      std::string(to_string(*kind)) + " plugin");
  return lib;
}

PluginInstance<Sensor> PluginLoader::create_sensor(const PluginEntry& entry,
                                                   std::string_view procfs,
                                                   std::string_view sysfs) {
  PluginInstance<Sensor> inst;
  inst.library = open(PluginKind::sensor, entry);
  inst.options = validate_options(*inst.library->info, entry.options, entry.pos.file, "sensor");
  inst.log = std::make_unique<PrefixLogger>(log_, "sensor " + entry.name);
  SensorContext ctx{entry.name, procfs, sysfs, inst.options, *inst.log};
  auto& factory = inst.library->library.get_alias<SensorFactory>("kiwi_create");
  try {
    inst.object = factory(ctx);
  } catch (const std::exception& e) {
    throw PluginError(entry.plugin_pos.str() + ": " + inst.library->file + ": sensor '" +
                      entry.name + "' refused to start: " + e.what());
  }
  if (!inst.object) throw PluginError(inst.library->file + ": factory returned no object");
  return inst;
}

PluginInstance<Handler> PluginLoader::create_handler(const PluginEntry& entry,
                                                     const DataSource& data,
                                                     std::string_view agent_version) {
  PluginInstance<Handler> inst;
  inst.library = open(PluginKind::handler, entry);
  inst.options = validate_options(*inst.library->info, entry.options, entry.pos.file, "route");
  inst.log = std::make_unique<PrefixLogger>(log_, "route " + entry.path);
  HandlerContext ctx{entry.path, inst.options, *inst.log, data, agent_version};
  auto& factory = inst.library->library.get_alias<HandlerFactory>("kiwi_create");
  try {
    inst.object = factory(ctx);
  } catch (const std::exception& e) {
    throw PluginError(entry.plugin_pos.str() + ": " + inst.library->file + ": handler for '" +
                      entry.path + "' refused to start: " + e.what());
  }
  if (!inst.object) throw PluginError(inst.library->file + ": factory returned no object");
  return inst;
}

std::string describe_plugin(const LoadedLibrary& lib) {
  std::ostringstream out;
  out << lib.info->name << " (" << to_string(lib.info->kind) << " plugin, ABI " << lib.abi_version
      << ")\n  " << lib.info->description << "\n  file: " << lib.file << "\n";
  if (lib.info->options.empty()) {
    out << "  options: none\n";
    return out.str();
  }
  out << "  options:\n";
  for (auto& o : lib.info->options)
    out << "    " << o.key << " (" << type_name(o.type) << ", default " << o.default_toml
        << ")\n      " << o.description << "\n";
  return out.str();
}

}  // namespace kiwi::agent
