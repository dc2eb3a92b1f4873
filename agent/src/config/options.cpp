#include "config/options.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <sstream>

#include "base/duration.hpp"
#include "base/size.hpp"
#include "config/option_reader.hpp"

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

std::vector<std::string_view> option_choices(const OptionSpec& spec) {
  std::vector<std::string_view> out;
  for (std::string_view rest = spec.choices; !rest.empty();) {
    const auto comma = std::min(rest.find(','), rest.size());
    out.push_back(rest.substr(0, comma));
    rest.remove_prefix(std::min(comma + 1, rest.size()));
  }
  return out;
}

namespace {

// "\"a\"", "\"a\" or \"b\"", "\"a\", \"b\" or \"c\"": a row's choices as a message lists them.
std::string quoted_choices(const OptionSpec& spec) {
  const auto words = option_choices(spec);
  std::string out;
  for (std::size_t i = 0; i < words.size(); ++i)
    out += std::string(i == 0                  ? ""
                       : i + 1 == words.size() ? " or "
                                               : ", ") +
           "\"" + std::string(words[i]) + "\"";
  return out;
}

}  // namespace

std::string option_type_text(const OptionSpec& spec) {
  if (spec.choices.empty()) return std::string(option_type_name(spec.type));
  if (spec.type == OptionType::integer) return "integer or " + quoted_choices(spec);
  return quoted_choices(spec);
}

std::string toml_repr(const toml::node& node) {
  std::ostringstream s;
  node.visit([&](const auto& v) {
    if constexpr (toml::is_string<decltype(v)>)
      s << '"' << v.get() << '"';
    else if constexpr (toml::is_table<decltype(v)>)
      s << "a table";
    else if constexpr (toml::is_array<decltype(v)>)
      s << "an array";
    else
      s << v;
  });
  return s.str();
}

namespace {

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

// The strings of the list or table `node` into `v`; false with `why` at the first item that is
// not a string.
bool read_strings(const toml::node& node, OptionValue& v, Misfit& why) {
  auto not_string = [&](const toml::node& item, std::string_view key) {
    why = {Misfit::Kind::item, &item, std::string(key)};
    return false;
  };
  if (const toml::array* a = node.as_array()) {
    for (auto& item : *a) {
      if (!item.is_string()) return not_string(item, {});
      v.string_list.push_back(*item.value<std::string>());
    }
    return true;
  }
  for (auto& [k, item] : *node.as_table()) {
    if (!item.is_string()) return not_string(item, k.str());
    v.table.emplace_back(std::string(k.str()), *item.value<std::string>());
  }
  return true;
}

bool chosen(const OptionSpec& spec, std::string_view word) {
  const auto words = option_choices(spec);
  return std::find(words.begin(), words.end(), word) != words.end();
}

}  // namespace

std::optional<OptionValue> read_option_value(const OptionSpec& spec, const toml::node& node,
                                             Misfit& why) {
  why = {Misfit::Kind::type, &node, {}};
  OptionValue v;
  v.key = std::string(spec.key);
  v.type = spec.type;
  switch (spec.type) {
    case OptionType::boolean:
      if (!node.is_boolean()) return std::nullopt;
      v.boolean = *node.value<bool>();
      break;
    case OptionType::integer:
      if (!spec.choices.empty() && node.is_string()) {  // a word in place of a number: "auto"
        v.string = *node.value<std::string>();
        why.kind = Misfit::Kind::choice;
        return chosen(spec, v.string) ? std::optional(v) : std::nullopt;
      }
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
      if (!spec.choices.empty() && !chosen(spec, v.string)) {
        why.kind = Misfit::Kind::choice;
        return std::nullopt;
      }
      break;
    case OptionType::string_list:
      if (!node.is_array() || !read_strings(node, v, why)) return std::nullopt;
      break;
    case OptionType::string_table:
      if (!node.is_table() || !read_strings(node, v, why)) return std::nullopt;
      break;
    case OptionType::duration: {
      // The config's own parser ([collector] interval etc.), so "5s" means one thing everywhere.
      if (!node.is_string()) return std::nullopt;
      auto d = parse_duration(*node.value<std::string>());
      if (!d) {
        why.kind = Misfit::Kind::form;
        return std::nullopt;
      }
      v.duration = *d;
      break;
    }
    case OptionType::size: {
      std::optional<std::uint64_t> n;
      if (node.is_integer()) {
        if (const auto i = *node.value<std::int64_t>(); i >= 0)
          n = parse_size(std::to_string(i));  // the same 2^53 ceiling as a string
      } else if (node.is_string()) {
        n = parse_size(*node.value<std::string>());
      } else {
        return std::nullopt;
      }
      if (!n) {
        why.kind = Misfit::Kind::form;
        return std::nullopt;
      }
      v.size = *n;
      break;
    }
  }
  const auto x = ranged(v);
  if (spec.has_range && x && (*x < spec.min || *x > spec.max)) {
    why.kind = Misfit::Kind::range;
    return std::nullopt;
  }
  return v;
}

// A range in the option's own terms: "1..3600", "10ms..1m" (durations as the config writes
// them), bytes.
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

// What a plugin's option that does not fit is told: at the option (an item of a list is the
// option's fault), "expected <its type>" or "out of range: <range>". A row with choices lists
// them.
std::string plugin_problem(const OptionSpec& spec, const toml::node& node, const Misfit& why) {
  if (why.kind == Misfit::Kind::range) return "out of range: " + option_range_text(spec);
  // A string of the wrong form is named, as the config does for its own durations.
  std::string given;
  if ((spec.type == OptionType::duration || spec.type == OptionType::size ||
       !spec.choices.empty()) &&
      node.is_string())
    given = ", not \"" + *node.value<std::string>() + "\"";
  if (spec.choices.empty()) return "expected " + std::string(expected(spec.type)) + given;
  return std::string("expected ") +
         (spec.type == OptionType::integer ? "an integer or " : "one of ") + quoted_choices(spec) +
         given;
}

SourcePos place(const std::string& file, const toml::source_region& r) {
  return {file, r.begin.line, r.begin.column};
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
          place(file, key.source()), keyed(key.str()),
          "unknown option for plugin " + std::string(info.name) +
              (accepted.empty() ? "; it takes no options" : "; accepted: " + accepted));
    }
  }
  std::vector<OptionValue> values;
  Misfit why;
  for (auto& spec : info.options) {
    if (const toml::node* node = given.get(spec.key)) {
      auto v = read_option_value(spec, *node, why);
      if (!v)
        throw ConfigError(place(file, node->source()), keyed(spec.key),
                          plugin_problem(spec, *node, why));
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
    auto v = node ? read_option_value(spec, *node, why) : std::nullopt;
    if (!v)
      throw InvalidDefault(
          "plugin " + std::string(info.name) + ": option '" + std::string(spec.key) +
          "' has an invalid default '" + std::string(spec.default_toml) + "'" +
          (node && (why.kind == Misfit::Kind::range || why.kind == Misfit::Kind::choice)
               ? " (" + plugin_problem(spec, *node, why) + ")"
               : ""));
    values.push_back(std::move(*v));
  }
  return Options(std::move(values));
}

}  // namespace kiwi::agent
