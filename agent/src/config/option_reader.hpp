// The one reader of option values: a TOML value against its row (OptionSpec), for a plugin's rows
// (validate_options) and the agent's own (the host schema, config.cpp). It says what does not
// fit and where; each caller words that its own way. For the config layer only (toml++), as is
// read_text().
#pragma once

#include <fstream>
#include <kiwi/plugin.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "config/toml_table.hpp"

namespace kiwi::agent {

// Why a value does not fit its row.
struct Misfit {
  enum class Kind {
    type,   // not of the row's type: a number for a duration, a string for a list
    item,   // an item of a list, or a value of a table, that is not a string (`node` is the item)
    form,   // a string of the wrong form: "1 second" for a duration, "1 GB" for a size
    range,  // outside the row's range
    choice  // a string that is not one of the row's choices
  };
  Kind kind = Kind::type;
  const toml::node* node = nullptr;  // what does not fit: the value, or its item
  std::string item_key;              // Kind::item in a table: the entry's key
};

// `node` as the row `spec` says: type, form, range and choices. nullopt with `why` set when it
// does not fit.
std::optional<OptionValue> read_option_value(const OptionSpec& spec, const toml::node& node,
                                             Misfit& why);

// A value as a message quotes it: "x" for a string, 2.5, "a table", "an array".
std::string toml_repr(const toml::node& node);

// The whole of `path`; nullopt (errno set) when it cannot be opened. For the config file, the
// files it includes and the files it names (PEM, bearer tokens).
inline std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

}  // namespace kiwi::agent
