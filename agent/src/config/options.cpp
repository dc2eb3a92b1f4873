#include "config/options.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "base/duration.hpp"
#include "base/size.hpp"
#include "config/toml_table.hpp"

namespace kiwi::agent {

std::string_view option_type_name(OptionType t) {
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
    case OptionType::duration:
      return "duration";
    case OptionType::size:
      return "size";
    case OptionType::string_table:
      return "table of strings";
  }
  return "?";
}

namespace {

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
    case OptionType::duration:
      return "a duration as a string, e.g. \"500ms\", \"10s\", \"2m\", \"1h30m\"";
    case OptionType::size:
      return "a size in bytes: an integer, or a string with a unit, e.g. \"512\", \"64KiB\", "
             "\"1MiB\", \"10MB\"";
    case OptionType::string_table:
      return "a table of strings, e.g. { \"X-Scope-OrgID\" = \"pi\" }";
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
    case OptionType::duration: {
      // The config's own parser ([collector] interval etc.), so "5s" means one thing everywhere.
      auto d = node.is_string() ? parse_duration(*node.value<std::string>()) : std::nullopt;
      if (!d) return std::nullopt;
      v.duration = *d;
      break;
    }
    case OptionType::string_table: {
      const toml::table* t = node.as_table();
      if (!t) return std::nullopt;
      for (auto& [k, item] : *t) {
        if (!item.is_string()) return std::nullopt;
        v.table.emplace_back(std::string(k.str()), *item.value<std::string>());
      }
      break;
    }
    case OptionType::size: {
      std::optional<std::uint64_t> n;
      if (node.is_integer()) {
        if (const auto i = *node.value<std::int64_t>(); i >= 0)
          n = parse_size(std::to_string(i));  // the same 2^53 ceiling as a string
      } else if (node.is_string()) {
        n = parse_size(*node.value<std::string>());
      }
      if (!n) return std::nullopt;
      v.size = *n;
      break;
    }
  }
  return v;
}

// The value of `v` a range applies to: the integer, the number, milliseconds, bytes.
std::optional<double> ranged(const OptionValue& v) {
  switch (v.type) {
    case OptionType::integer:
      return static_cast<double>(v.integer);
    case OptionType::number:
      return v.number;
    case OptionType::duration:
      return static_cast<double>(v.duration.count());
    case OptionType::size:
      return static_cast<double>(v.size);
    default:
      return std::nullopt;
  }
}

// A range in the option's own terms: "1..3600", "10ms..1m" (durations as the config writes
// them), bytes.
}  // namespace

std::string option_range_text(const OptionSpec& spec) {
  auto one = [&](double x) {
    if (spec.type == OptionType::duration)
      return format_duration(Millis(static_cast<std::int64_t>(x)));
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.15g", x);
    return std::string(buf) + (spec.type == OptionType::size ? " bytes" : "");
  };
  return one(spec.min) + ".." + one(spec.max);
}

namespace {

// Why `v` is outside `spec`'s range; nullopt if it is inside or there is none.
std::optional<std::string> out_of_range(const OptionSpec& spec, const OptionValue& v) {
  const auto x = ranged(v);
  if (!spec.has_range || !x || (*x >= spec.min && *x <= spec.max)) return std::nullopt;
  return "out of range: " + option_range_text(spec);
}

}  // namespace

Options validate_options(const PluginInfo& info, const OptionTable* table, const std::string& file,
                         const std::string& where, std::span<const std::string_view> host_keys) {
  static const toml::table none;
  const toml::table& given = table ? toml_table(*table) : none;
  // "sensor" -> "sensor.options.<key>"; "remote_write." (whose options are the table's own keys)
  // -> "remote_write.<key>".
  const auto keyed = [&](std::string_view key) {
    return where + (where.ends_with('.') ? "" : ".options.") + std::string(key);
  };
  for (auto& [key, node] : given) {
    if (std::find(host_keys.begin(), host_keys.end(), key.str()) != host_keys.end()) continue;
    bool known = false;
    for (auto& spec : info.options) known |= spec.key == key.str();
    if (!known) {
      std::string accepted;
      for (auto& spec : info.options)
        accepted += (accepted.empty() ? "" : ", ") + std::string(spec.key);
      for (auto k : host_keys) accepted += (accepted.empty() ? "" : ", ") + std::string(k);
      throw ConfigError(
          SourcePos{file, key.source().begin.line, key.source().begin.column}, keyed(key.str()),
          "unknown option for plugin " + std::string(info.name) +
              (accepted.empty() ? "; it takes no options" : "; accepted: " + accepted));
    }
  }
  std::vector<OptionValue> values;
  for (auto& spec : info.options) {
    if (const toml::node* node = given.get(spec.key)) {
      auto v = convert(spec, *node);
      if (!v) {
        // A string of the wrong form is named, as the config does for its own durations.
        std::string given;
        if ((spec.type == OptionType::duration || spec.type == OptionType::size) &&
            node->is_string())
          given = ", not \"" + *node->value<std::string>() + "\"";
        throw ConfigError(SourcePos{file, node->source().begin.line, node->source().begin.column},
                          keyed(spec.key), "expected " + std::string(expected(spec.type)) + given);
      }
      if (auto why = out_of_range(spec, *v))
        throw ConfigError(SourcePos{file, node->source().begin.line, node->source().begin.column},
                          keyed(spec.key), *why);
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
    const auto why = v ? out_of_range(spec, *v) : std::nullopt;
    if (!v || why)
      throw InvalidDefault("plugin " + std::string(info.name) + ": option '" +
                           std::string(spec.key) + "' has an invalid default '" +
                           std::string(spec.default_toml) + "'" + (why ? " (" + *why + ")" : ""));
    values.push_back(std::move(*v));
  }
  return Options(std::move(values));
}

}  // namespace kiwi::agent
