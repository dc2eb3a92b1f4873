// The README's configuration table against the host schema (config/schema.hpp): every setting, its
// type and default as its row declares them, and no row the schema does not have.
#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <sstream>

#include "config/options.hpp"
#include "config/schema.hpp"
#include "markdown_support.hpp"

using namespace kiwi::agent;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A row's type and default as a docs table writes them: "duration", "`\"1s\"`"; "table" for an
// entry's options; the default in words when it is not a value, "(required)" for a key that must
// be given.
std::string doc_type(const HostOption& row) {
  return row.plugin_options ? "table" : option_type_text(row.spec);
}
std::string doc_default(const HostOption& row) {
  if (!row.spec.default_toml.empty()) {
    std::string literal(row.spec.default_toml);
    // The install layout's plugin directory is the build's; the README names it in general.
    const std::string built = KIWI_PLUGIN_DIR_FROM_BINDIR;
    if (auto at = literal.find(built); at != std::string::npos)
      literal.replace(at, built.size(), "../<libdir>/kiwi-agent");
    return "`" + literal + "`";
  }
  return row.missing.empty() ? std::string(row.default_text) : "(required)";
}

}  // namespace

TEST_CASE("docs: the README's configuration table shows every setting's type and default") {
  const std::string readme = read_file(KIWI_SOURCE_DIR "/README.md");
  struct Shown {
    std::string type, default_cell;
    int line;
  };
  std::map<std::string, Shown> shown;
  const std::string_view section = kiwi::test::markdown_section(readme, "## Configuration");
  // Line numbers in the file, not in the section.
  const auto before = static_cast<int>(std::count(readme.data(), section.data(), '\n'));
  for (auto& table : kiwi::test::markdown_tables(section)) {
    for (auto& line : table.lines) line += before;
    if (table.header.size() < 3 || table.header[0] != "key" || table.header[1] != "type" ||
        table.header[2] != "default")
      continue;
    for (std::size_t i = 0; i < table.rows.size(); ++i) {
      const auto& cells = table.rows[i];
      REQUIRE(cells.size() >= 3);
      INFO("README.md:" << table.lines[i]);
      CHECK(shown.emplace(kiwi::test::unquoted(cells[0]), Shown{cells[1], cells[2], table.lines[i]})
                .second);  // once
    }
  }
  REQUIRE_FALSE(shown.empty());
  std::size_t rows = 0;
  auto check = [&](const std::string& key, const HostOption& row) {
    ++rows;
    INFO(key);
    const auto it = shown.find(key);
    REQUIRE(it != shown.end());
    INFO("README.md:" << it->second.line);
    CHECK(it->second.type == doc_type(row));
    CHECK(it->second.default_cell == doc_default(row));
  };
  for (auto& s : host_sections())
    for (auto& row : s.rows) check(std::string(s.name) + "." + std::string(row.spec.key), row);
  for (auto& e : host_entries())
    for (auto& row : e.rows) check(std::string(e.kind) + "." + std::string(row.spec.key), row);
  CHECK(shown.size() == rows);  // and nothing the schema does not have
}

TEST_CASE("docs: each output plugin's README table of the agent's keys is the schema's") {
  for (const std::string kind : {"remote_write", "mqtt"}) {
    INFO("plugins/" << kind << "/README.md");
    const std::string readme = read_file(KIWI_SOURCE_DIR "/plugins/" + kind + "/README.md");
    std::map<std::string, std::vector<std::string>> shown;
    for (auto& table : kiwi::test::markdown_tables(readme))
      if (table.header.size() >= 3 && table.header[0] == "key")
        for (auto& cells : table.rows) shown[kiwi::test::unquoted(cells.at(0))] = cells;
    const HostEntry& entry = host_entry(kind);
    CHECK(shown.size() == entry.rows.size());
    for (auto& row : entry.rows) {
      INFO(row.spec.key);
      REQUIRE(shown.count(std::string(row.spec.key)) == 1);
      CHECK(shown[std::string(row.spec.key)].at(1) == doc_type(row));
      CHECK(shown[std::string(row.spec.key)].at(2) == doc_default(row));
    }
  }
}
