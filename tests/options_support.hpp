// Options tables for tests: TOML text parsed as the config layer parses a file, its `table` as the
// OptionTable an entry points to (config/options.hpp). The document is kept for the rest of the
// process, as a Config keeps its documents.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/toml_table.hpp"

namespace kiwi::test {

inline const kiwi::agent::OptionTable* options_table(const std::string& document,
                                                     const std::string& table = "options",
                                                     const std::string& file = "kiwi.toml") {
  static std::vector<std::shared_ptr<toml::table>> keep;
  keep.push_back(
      std::make_shared<toml::table>(toml::parse(std::string_view(document), std::string(file))));
  return kiwi::agent::option_table(*(*keep.back())[table].as_table());
}

}  // namespace kiwi::test
