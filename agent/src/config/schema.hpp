// The host's option schema: the agent's own settings ([agent], [http], [http.auth], [http.tls],
// [collector], and the agent's keys of [[sensor]], [[route]] and [[remote_write]]) as rows of the
// type a plugin declares its options with (kiwi::OptionSpec: key, type, default, range, choices),
// read by the same reader (read_option_value), with what only the agent needs on top: where the
// value goes, checks no type says enough about (bind addresses, origins, bcrypt users, PEM files),
// and the keys a reload cannot change. The rows are the one place of each default; they drive
// reading, the reload's log line, check_reloadable(), and the tests that hold
// config/kiwi-agent.toml and the README's tables to them.
#pragma once

#include <kiwi/plugin.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"

namespace kiwi::agent {

struct HostOption;

// Where a row's value lives: a member of Config (a section's row) or of PluginEntry (an entry's),
// with how a read value is stored in it, compared and shown. Made from the member's path by
// host_field<&Config::http, &Config::Http::bind>() (config/schema.cpp).
struct HostField {
  void (*store)(void* root, const OptionValue& value);
  bool (*equal)(const void* a, const void* b);
  // The value in words, as the reload's log line and check_reloadable() write it: "1s",
  // "127.0.0.1:8095", "[a, b]", a string as it is ("" for the empty string), an integer row's
  // first choice for 0 ("auto").
  std::string (*text)(const HostOption& row, const void* root);
  // The value as a TOML literal ("\"1s\"", "[\"lo\"]", 256), "" when it has none (an optional
  // setting not set), for --print-config.
  std::string (*toml)(const HostOption& row, const void* root);
};

// A check beyond the type: why `value` is refused, or nullopt. For a string row the value; for a
// list each item; for a table each value, `entry` being its key ("" otherwise).
using HostCheck = std::optional<std::string> (*)(std::string_view value, std::string_view entry);
// Run once the value is stored: reads what it names into the configuration (a PEM file, a tokens
// file). Why it cannot, or nullopt.
using HostLoad = std::optional<std::string> (*)(Config& cfg, const std::string& value);

// What a string row takes besides being a string.
enum class HostText {
  any,
  non_empty,     // "" is refused ("must not be empty")
  path,          // not empty; "$ORIGIN" at the start is the executable's directory
  path_or_empty  // a path, or "" for none
};

struct HostOption {
  // As a plugin's row: key, type, default (a TOML literal; "" when there is none: the key is
  // optional, or required, or its default follows from other keys), description, range, choices.
  OptionSpec spec;
  HostField field;
  HostText text = HostText::any;
  bool restart_only = false;           // a reload that changes it is refused (check_reloadable)
  std::string_view default_text = {};  // a default that is not a value, in words: "3 x interval"
  std::string_view missing = {};       // required (an entry's key): what its absence is told
  std::string_view noun = {};          // a row with choices: "a log level", "a thread count"
  std::string_view wrong_type = {};    // the message for a value of another type; "{}" the value
  HostCheck check = nullptr;
  HostCheck check_key = nullptr;  // a table's keys: why a key is refused (at the key)
  HostLoad load = nullptr;
  bool plugin_options = false;  // an entry's `options`: any table, kept as written for the plugin
};

// A table of the configuration: [agent], [http], [http.auth] (a sub-table of [http] is a section
// whose name has its parent's and a dot).
struct HostSection {
  std::string_view name;
  std::span<const HostOption> rows;
  // After the table is read from a file: a check across its keys ([http.tls]: both files or
  // neither). Throws ConfigError.
  void (*finish)(const Config& cfg, const SourcePos& table) = nullptr;
  // The reload's note for the whole table, instead of one per key ("http.tls changed (...)"); ""
  // when it did not change.
  std::string (*note)(const Config& was, const Config& now) = nullptr;
};

// [[sensor]], [[route]], [[remote_write]], [[notify]], [[alert]]: the agent's keys of each entry.
struct HostEntry {
  std::string_view kind;        // "sensor"
  std::string_view plugin_key;  // "plugin"; "handler" for a route
  std::span<const HostOption> rows;
};

// The sections in the order the configuration lists them: agent, http, http.auth, http.tls,
// collector, alerts.
std::span<const HostSection> host_sections();
// The entries of plugins: sensor, route, remote_write, notify.
std::span<const HostEntry> host_entries();
// [[alert]]: its rows write into an AlertRule.
const HostEntry& host_alert_rule();
// [[peer]]: its rows write into a Peer.
const HostEntry& host_peer();
const HostEntry& host_entry(std::string_view kind);

// The configuration of the rows' defaults alone (no file read; plugin_dir's "$ORIGIN" left as
// it is): for the settings structs the configuration fills (HttpSettings, CollectorSettings), so
// that a default is written once, in its row.
const Config& schema_defaults();
// An entry of `kind` with the defaults of its rows ("remote_write": interval 10s, ...).
const PluginEntry& entry_defaults(std::string_view kind);

// For a reload's log line: each setting that differs between `was` and `now`, in schema order,
// "collector.interval 1s -> 2s", or a table's note ("http.auth changed (...)"). Keys only a
// restart changes are not in it (check_reloadable() refuses them first).
std::vector<std::string> setting_changes(const Config& was, const Config& now);

// The whole configuration as one TOML file (kiwi-agent --print-config): every setting of every
// section with its value (defaults included), then every entry with its keys and options, the
// included files' entries among them. Loaded again, it is the same configuration.
std::string render_toml(const Config& cfg);

}  // namespace kiwi::agent
