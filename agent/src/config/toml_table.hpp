// The TOML behind an OptionTable: for the config layer and the tests that build tables, never in a
// header other layers include (toml++ is the config layer's alone).
#pragma once

#include <toml++/toml.h>

#include "config/config.hpp"

namespace kiwi::agent {

// An OptionTable is a toml::table of a document the Config keeps: the handle is its address.
inline const OptionTable* option_table(const toml::table& t) {
  return reinterpret_cast<const OptionTable*>(&t);
}
inline const toml::table& toml_table(const OptionTable& t) {
  return *reinterpret_cast<const toml::table*>(&t);
}

}  // namespace kiwi::agent
