// The host's option schema (config/schema.hpp) against what shows it: config/kiwi-agent.toml (the
// embedded default, printed by --print-default-config and installed in /etc) must set every
// setting to its row's default and say what each is, so the rows stay the one place of each
// default.
#include <catch2/catch.hpp>
#include <sstream>

#include "config/schema.hpp"

using namespace kiwi::agent;

namespace {

std::string full_key(const HostSection& s, const HostOption& row) {
  return std::string(s.name) + "." + std::string(row.spec.key);
}

// The lines of `[section]` in `text` (from its header to the next blank line), with a leading "# "
// taken off (a key shown commented out).
std::vector<std::string> lines_of(std::string_view text, std::string_view section) {
  std::vector<std::string> out;
  std::istringstream in{std::string(text)};
  std::string line;
  bool in_section = false;
  while (std::getline(in, line)) {
    if (line.starts_with("[")) in_section = line == "[" + std::string(section) + "]";
    if (line.empty()) in_section = false;
    if (!in_section) continue;
    if (line.starts_with("# ")) line.erase(0, 2);
    out.push_back(line);
  }
  return out;
}

}  // namespace

TEST_CASE("schema: every row's default is a value of its row, or says in words what it is") {
  REQUIRE_NOTHROW(schema_defaults());
  for (auto& e : host_entries()) REQUIRE_NOTHROW(entry_defaults(e.kind));
  auto has_words = [](const HostOption& row) {
    return !row.default_text.empty() || !row.missing.empty() || row.plugin_options;
  };
  for (auto& s : host_sections())
    for (auto& row : s.rows) {
      INFO(full_key(s, row));
      CHECK(row.spec.default_toml.empty() == has_words(row));
    }
  for (auto& e : host_entries())
    for (auto& row : e.rows) {
      INFO(e.kind << "." << row.spec.key);
      CHECK((row.spec.default_toml.empty() || row.plugin_options) == has_words(row));
    }
  // Typed as the rows say (README "Configuration"), and derived where a row says so.
  const Config& d = schema_defaults();
  CHECK(d.http.threads == 0);  // "auto"
  CHECK(d.http.keep_alive == Millis(5000));
  CHECK(d.collector.stale_after == 3 * d.collector.interval);
  CHECK(d.agent.log_level == kiwi::LogLevel::info);
  CHECK(entry_defaults("remote_write").interval == Millis(10'000));
  CHECK(entry_defaults("remote_write").max_samples == 10'000);
  CHECK_FALSE(entry_defaults("sensor").interval.has_value());
}

TEST_CASE("schema: config/kiwi-agent.toml sets every setting to its row's default") {
  // "$ORIGIN" as the executable's directory leaves plugin_dir as the row writes it.
  const Config file = default_config("$ORIGIN");
  const Config& rows = schema_defaults();
  for (auto& s : host_sections())
    for (auto& row : s.rows) {
      const std::string key = full_key(s, row);
      INFO(key << " = " << row.field.text(row, &file) << " in the file, "
               << row.field.text(row, &rows) << " in the row");
      CHECK(row.field.equal(&file, &rows));
      // Set by the file itself, unless the row's default is not a value (shown commented out).
      CHECK((file.where(key).file == "<built-in default>") == !row.spec.default_toml.empty());
    }
}

TEST_CASE("schema: config/kiwi-agent.toml shows every setting with a comment on what it does") {
  const std::string_view text = default_config_text();
  for (auto& s : host_sections())
    for (auto& row : s.rows) {
      INFO(full_key(s, row));
      const auto lines = lines_of(text, s.name);
      const auto line = std::find_if(lines.begin(), lines.end(), [&](const std::string& l) {
        return l.starts_with(std::string(row.spec.key) + " = ");
      });
      REQUIRE(line != lines.end());
      CHECK(line->find(" # ") != std::string::npos);
    }
  // The entries' keys, in the comments that introduce them.
  for (auto& e : host_entries())
    for (auto& row : e.rows) {
      INFO(e.kind << "." << row.spec.key);
      CHECK(text.find("\n# " + std::string(row.spec.key) + " = ") != std::string_view::npos);
    }
}

TEST_CASE(
    "schema: a reload's log line lists each changed setting from the rows, worded as before") {
  const Config was = load_config_text("[http]\nthreads = 1\n", "a.toml", "/x");
  CHECK(setting_changes(was, was).empty());
  CHECK(setting_changes(was, load_config_text("[http]\nthreads = 1\n", "b.toml", "/x")).empty());
  const Config now = load_config_text(R"(
[agent]
log_level = "warn"
plugin_dir = "/plugins"
data_dir = "/elsewhere"
[http]
bind = "0.0.0.0:9000"
threads = 3
keep_alive = "30s"
max_connections = 100
cors_origins = ["http://board.local", "https://b"]
[http.auth]
basic_users = { prometheus = "$2b$10$xbVenhPcxQVYW/yjg3pCAuSnXtBgJHldnmAzGr12Bn5MPsLmz9ZEa" }
[collector]
interval = "2s"
retention = "1h"
stale_after = "5s"
commit_interval = "4m"
max_series_per_sensor = 10
)",
                                      "b.toml", "/x");
  // Schema order; data_dir takes a restart (check_reloadable refuses it), so it is not listed.
  CHECK(setting_changes(was, now) == std::vector<std::string>{
                                         "agent.plugin_dir /x/" KIWI_PLUGIN_DIR_FROM_BINDIR
                                         " -> /plugins",
                                         "agent.log_level info -> warn",
                                         "http.bind 127.0.0.1:8095 -> 0.0.0.0:9000",
                                         "http.threads 1 -> 3",
                                         "http.keep_alive 5s -> 30s",
                                         "http.max_connections 256 -> 100",
                                         "http.cors_origins [] -> [http://board.local, https://b]",
                                         "http.auth changed (on: 1 users, 0 bearer tokens)",
                                         "collector.interval 1s -> 2s",
                                         "collector.retention 1d -> 1h",
                                         "collector.stale_after 3s -> 5s",
                                         "collector.commit_interval 5m -> 4m",
                                         "collector.max_series_per_sensor 5000 -> 10",
                                     });
  const Config back = load_config_text("[http]\nthreads = \"auto\"\n", "c.toml", "/x");
  CHECK(setting_changes(now, back) ==
        std::vector<std::string>{
            "agent.plugin_dir /plugins -> /x/" KIWI_PLUGIN_DIR_FROM_BINDIR,
            "agent.log_level warn -> info",
            "http.bind 0.0.0.0:9000 -> 127.0.0.1:8095",
            "http.threads 3 -> auto",
            "http.keep_alive 30s -> 5s",
            "http.max_connections 100 -> 256",
            "http.cors_origins [http://board.local, https://b] -> []",
            "http.auth changed (off)",
            "collector.interval 2s -> 1s",
            "collector.retention 1h -> 1d",
            "collector.stale_after 5s -> 3s",
            "collector.commit_interval 4m -> 5m",
            "collector.max_series_per_sensor 10 -> 5000",
        });
}
