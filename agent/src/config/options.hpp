// Options: a TOML table checked against an option table (OptionSpec rows, kiwi/plugin.hpp), with
// each type, range and default applied, and file:line:col in every error. Plugins' options are read
// here; the agent's own sections use the same rows.
#pragma once

#include <kiwi/plugin.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"

namespace kiwi::agent {

// An option table declares a default that is not a value of its type, or outside its range: the
// plugin's mistake, not the user's. what() names the plugin and the option.
struct InvalidDefault : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Checks the TOML table `given` (null: none given) against `info.options` and fills in the
// defaults. `where` prefixes a key in messages ("sensor" -> "sensor.options.<key>";
// "remote_write." -> "remote_write.<key>", for options given flat beside the agent's keys);
// `host_keys` are skipped (not options). Throws
// ConfigError at the offending key, InvalidDefault for a default of the table that does not fit.
Options validate_options(const PluginInfo& info, const OptionTable* given, const std::string& file,
                         const std::string& where,
                         std::span<const std::string_view> host_keys = {});

// "duration", "list of strings", ...: a type as --describe-plugin names it.
std::string_view option_type_name(OptionType type);
// A row's type with its choices: "duration", "\"prometheus\" or \"json\"" (a string row with
// choices), "integer or \"auto\"" (an integer row with choices). --describe-plugin and the docs'
// option tables write this.
std::string option_type_text(const OptionSpec& spec);
// A row's choices: "error,warn" -> {"error", "warn"}; none for "".
std::vector<std::string_view> option_choices(const OptionSpec& spec);
// A row's range in its own terms: "1..3600", "10ms..1m" (durations as the config writes them),
// "0..1024 bytes".
std::string option_range_text(const OptionSpec& spec);

}  // namespace kiwi::agent
