// The validated configuration. Defaults have one source: config/kiwi-agent.toml, embedded in the
// binary at build time. A user's file is read on top of it: every scalar it sets overrides the
// default; a [[sensor]] (or [[route]]) list in the user's file replaces the default list whole.
#pragma once

#include <toml++/toml.h>
#include <kiwi/plugin.hpp>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "duration.hpp"

namespace kiwi::agent {

// A place in a config file, for messages: "kiwi.toml:12:3".
struct SourcePos {
  std::string file;
  std::uint32_t line = 0;
  std::uint32_t column = 0;
  std::string str() const;
};

// Bad configuration. what() is "<file>:<line>:<col>: <key>: <problem>"; exit code 2.
struct ConfigError : std::runtime_error {
  ConfigError(const SourcePos& pos, const std::string& key, const std::string& problem);
  explicit ConfigError(const std::string& message) : std::runtime_error(message) {}
};

struct BindAddress {
  std::string host;  // numeric IPv4 or IPv6 literal (without brackets)
  std::uint16_t port = 0;
  bool ipv6 = false;
  std::string str() const;  // "127.0.0.1:8095" or "[::1]:8095"
};

// One [[sensor]] or [[route]] entry.
struct PluginEntry {
  std::string plugin;              // name ("cpu") or path ("./x.so"), as written
  std::string name;                // sensor instance name (defaults to the plugin name)
  std::string path;                // route path ("/api/current", "/assets/*")
  std::optional<Millis> interval;  // sensor interval override
  // The entry's options, validated later against the plugin's option table. Points into
  // Config::documents (toml++ drops source positions on copy, and errors need them).
  const toml::table* options = nullptr;
  SourcePos pos;         // the entry itself
  SourcePos plugin_pos;  // its plugin/handler key, for loader errors
};

struct Config {
  std::string source;  // file path, or "<built-in default>"
  struct {
    std::string data_dir;
    std::string plugin_dir;    // "$ORIGIN" already replaced by the executable's directory
    SourcePos plugin_dir_pos;  // where it was set, for "plugin not found" messages
    std::string procfs;
    std::string sysfs;
    LogLevel log_level = LogLevel::info;
  } agent;
  struct {
    BindAddress bind;
    int threads = 0;  // 0: "auto" (resolved by HttpServer)
    Millis keep_alive{0};
    int max_connections = 0;
    std::vector<std::string> cors_origins;
  } http;
  struct {
    Millis interval{0};
    Millis retention{0};
    Millis stale_after{0};
    Millis commit_interval{0};
    std::string snapshot_path;  // empty: no snapshot file
  } collector;
  std::vector<PluginEntry> sensors;
  std::vector<PluginEntry> routes;
  std::vector<std::shared_ptr<const toml::table>> documents;  // keeps `options` alive
};

// The embedded text of config/kiwi-agent.toml.
std::string_view default_config_text();

// Reads `path` over the defaults. Throws ConfigError (also for unreadable files).
Config load_config_file(const std::string& path, const std::string& exe_dir);
// The same for text already in memory; `source` names it in messages.
Config load_config_text(std::string_view text, const std::string& source,
                        const std::string& exe_dir);
// The defaults alone.
Config default_config(const std::string& exe_dir);

std::optional<BindAddress> parse_bind(std::string_view text);

// A sensor's name when its entry has none: the plugin as written, without a directory, ".so" and
// "kiwi-sensor-" ("cpu", "/opt/x/kiwi-sensor-gpu.so" -> "gpu", "./my_probe.so" -> "my_probe").
std::string default_sensor_name(std::string_view plugin);

}  // namespace kiwi::agent
