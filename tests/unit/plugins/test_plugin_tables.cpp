// Every sensor plugin against its own tables, on every fixture board: what it emits is declared in
// its MetricSpec table (the HELP text of /metrics) with the same unit and labels, every declared
// metric shows up on some board, and its sample.toml and README show the option table's defaults.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "clock_sensor.hpp"
#include "config/options.hpp"
#include "cpu_sensor.hpp"
#include "cpufreq_sensor.hpp"
#include "devfreq_sensor.hpp"
#include "diskio_sensor.hpp"
#include "hwmon_sensor.hpp"
#include "markdown_support.hpp"
#include "memory_sensor.hpp"
#include "network_sensor.hpp"
#include "plugin/metric_check.hpp"
#include "plugin/plugin_loader.hpp"
#include "power_sensor.hpp"
#include "pressure_sensor.hpp"
#include "processes_sensor.hpp"
#include "sensor_test_util.hpp"
#include "storage_sensor.hpp"
#include "thermal_sensor.hpp"

using kiwi_sensor_test::fixture;
using kiwi_sensor_test::Harness;
using kiwi_sensor_test::read_text;
using kiwi_sensor_test::ScratchTree;

namespace {

using Factory = std::function<std::unique_ptr<kiwi::Sensor>(const kiwi::SensorContext&)>;

template <class S>
Factory make() {
  return [](const kiwi::SensorContext& ctx) { return std::make_unique<S>(ctx); };
}

struct Plugin {
  std::string_view name;
  std::span<const kiwi::OptionSpec> options;
  std::span<const kiwi::MetricSpec> metrics;
  Factory create;
};

const Plugin kPlugins[] = {
    {"cpu", kiwi::cpu::kOptions, kiwi::cpu::kMetricSpecs, make<kiwi::cpu::CpuSensor>()},
    {"thermal", kiwi::thermal::kOptions, kiwi::thermal::kMetricSpecs,
     make<kiwi::thermal::ThermalSensor>()},
    {"memory", kiwi::no_options, kiwi::memory::kMetricSpecs, make<kiwi::memory::MemorySensor>()},
    // statvfs sees the live system, not the fixture: every mount gets the same made-up numbers.
    {"storage", kiwi::storage::kOptions, kiwi::storage::kMetricSpecs,
     [](const kiwi::SensorContext& ctx) {
       return std::make_unique<kiwi::storage::StorageSensor>(ctx, [](const std::string&) {
         return kiwi::storage::FsStats{4096, 1000, 500, 400, 64, 32};
       });
     }},
    {"network", kiwi::network::kOptions, kiwi::network::kMetricSpecs,
     make<kiwi::network::NetworkSensor>()},
    {"diskio", kiwi::diskio::kOptions, kiwi::diskio::kMetricSpecs,
     make<kiwi::diskio::DiskioSensor>()},
    {"pressure", kiwi::no_options, kiwi::pressure::kMetrics,
     make<kiwi::pressure::PressureSensor>()},
    {"devfreq", kiwi::no_options, kiwi::devfreq::kMetrics, make<kiwi::devfreq::DevfreqSensor>()},
    {"cpufreq", kiwi::no_options, kiwi::cpufreq::kMetrics, make<kiwi::cpufreq::CpufreqSensor>()},
    {"power", kiwi::no_options, kiwi::power::kMetrics, make<kiwi::power::PowerSensor>()},
    {"processes", kiwi::processes::kOptions, kiwi::processes::kMetrics,
     make<kiwi::processes::ProcessesSensor>()},
    {"hwmon", kiwi::hwmon::kOptions, kiwi::hwmon::kMetricSpecs, make<kiwi::hwmon::HwmonSensor>()},
    // The kernel's clock, not the board's tree: the same reading on every board.
    {"clock", kiwi::no_options, kiwi::clock::kMetrics, make<kiwi::clock::ClockSensor>()},
};

constexpr std::string_view kBoards[] = {"rk3588", "rpi4", "rpi5", "vm", "x86", "awkward"};

std::set<std::string> label_names(std::string_view comma_list) {
  std::set<std::string> out;
  while (!comma_list.empty()) {
    const auto comma = std::min(comma_list.find(','), comma_list.size());
    out.emplace(comma_list.substr(0, comma));
    comma_list.remove_prefix(std::min(comma + 1, comma_list.size()));
  }
  return out;
}

}  // namespace

TEST_CASE("plugins: every metric emitted on every board is declared, with its unit and labels") {
  std::map<std::string, std::set<std::string>> seen;  // plugin -> metric names emitted anywhere
  for (const auto& plugin : kPlugins)
    for (auto board : kBoards) {
      INFO(plugin.name << " on " << board);
      ScratchTree tree(board);
      Harness h(tree.root(), kiwi_sensor_test::default_values(plugin.options));
      auto sensor = plugin.create(h.context());
      // Two readings, the second one second later, so rates and ratios are emitted too. A board
      // without what a sensor reads (a VM's thermal zones) may report no data; never an error.
      // Sampled as the agent samples, so the rates it derives from counters are checked too.
      REQUIRE_NOTHROW(h.sample(*sensor));
      tree.advance(board);
      REQUIRE_NOTHROW(h.sample(*sensor));
      for (const auto& s : h.sink.samples) {
        INFO(s.name);
        const auto spec = std::find_if(plugin.metrics.begin(), plugin.metrics.end(),
                                       [&](const auto& m) { return m.name == s.name; });
        REQUIRE(spec != plugin.metrics.end());
        CHECK(s.unit == kiwi::to_string(spec->unit));
        CHECK(s.kind == spec->kind);
        std::set<std::string> labels;
        for (const auto& [name, value] : s.labels) labels.insert(name);
        CHECK(labels == label_names(spec->labels));
        CHECK(std::isfinite(s.value));
        // What the host would drop (metric_check.hpp) an in-tree sensor never emits.
        std::vector<kiwi::Label> label_views;
        for (const auto& [name, value] : s.labels) label_views.push_back({name, value});
        CHECK(kiwi::agent::check_metric(*spec, label_views, s.value) == std::nullopt);
        seen[std::string(plugin.name)].insert(s.name);
      }
    }
  // ...and the fixtures are rich enough that every declared metric shows up on some board.
  for (const auto& plugin : kPlugins)
    for (const auto& spec : plugin.metrics) {
      INFO(plugin.name << ": " << spec.name << " is emitted on no fixture board");
      CHECK(seen[std::string(plugin.name)].count(std::string(spec.name)) == 1);
    }
}

TEST_CASE("plugins: sample.toml shows every option with its default") {
  for (const auto& plugin : kPlugins) {
    INFO(plugin.name);
    CHECK(kiwi_sensor_test::keys_missing_from_sample_toml(plugin.name, plugin.options).empty());
  }
}

TEST_CASE("plugins: the README documents every option, its type and default, and every metric") {
  for (const auto& plugin : kPlugins) {
    INFO(plugin.name);
    const std::string readme =
        read_text(fixture("../../plugins/" + std::string(plugin.name) + "/README.md"));
    for (auto section :
         {"## Configuration", "## Metrics", "## Example output", "## Troubleshooting"})
      CHECK_THAT(readme, Catch::Contains(section));
    for (const auto& option : plugin.options) {
      INFO(option.key);
      // A row of the Configuration table: | `key` | type | default | meaning |
      const std::string row =
          "| `" + std::string(option.key) + "` | " + kiwi::agent::option_type_text(option) + " |";
      CHECK_THAT(readme, Catch::Contains(row));
    }
    // The README's TOML example shows every option with its default, as sample.toml does.
    CHECK(kiwi_sensor_test::keys_missing_from(readme, plugin.options).empty());
    for (const auto& metric : plugin.metrics) {
      INFO(metric.name);
      CHECK_THAT(readme, Catch::Contains("`" + std::string(metric.name) + "`"));
    }
  }
}

TEST_CASE("plugins: each plugin's README shows its options as its option table declares them") {
  // Every plugin the build makes, as the agent loads it: sensors, handlers and outputs.
  struct NullLogger final : kiwi::Logger {
    void log(kiwi::LogLevel, std::string_view) override {}
  } log;
  kiwi::agent::PluginLoader loader(KIWI_PLUGIN_DIR, log);
  std::vector<std::string> files;
  for (auto& f : std::filesystem::directory_iterator(KIWI_PLUGIN_DIR))
    if (f.path().extension() == ".so") files.push_back(f.path().string());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 15);
  for (const auto& file : files) {
    kiwi::agent::PluginEntry entry;
    entry.plugin = file;
    const auto lib = loader.open(std::nullopt, entry);
    const std::string name(lib->info->name);
    const std::string dir = lib->info->kind == kiwi::PluginKind::handler ? "handlers" : "plugins";
    const std::string readme = read_text(fixture("../../" + dir + "/" + name + "/README.md"));
    INFO(dir << "/" << name << "/README.md");
    // The rows of its tables headed | option | type | default | ...
    std::map<std::string, std::pair<std::vector<std::string>, int>> shown;
    for (auto& table : kiwi::test::markdown_tables(readme)) {
      if (table.header.size() < 3 || table.header[0] != "option" || table.header[1] != "type" ||
          table.header[2] != "default")
        continue;
      for (std::size_t i = 0; i < table.rows.size(); ++i)
        shown[kiwi::test::unquoted(table.rows[i].at(0))] = {table.rows[i], table.lines[i]};
    }
    CHECK(shown.size() == lib->info->options.size());  // no row the table does not have
    for (const auto& option : lib->info->options) {
      INFO(option.key);
      const auto it = shown.find(std::string(option.key));
      REQUIRE(it != shown.end());
      INFO("line " << it->second.second);
      const auto& cells = it->second.first;
      CHECK(cells.at(1) == kiwi::agent::option_type_text(option));
      // The default as the row writes it, then any words; or, for a long list, "the list above"
      // when the README's example shows it.
      const std::string literal = "`" + std::string(option.default_toml) + "`";
      const std::string& cell = cells.at(2);
      const bool as_row = cell == literal || cell.starts_with(literal + " ");
      const bool above = cell == "the list above" &&
                         kiwi_sensor_test::keys_missing_from(readme, {&option, 1}).empty();
      CHECK((as_row || above));
      if (!as_row && !above) CHECK(cell == literal);  // what it should say
    }
  }
}

TEST_CASE("plugins: each notifier's sample.toml and README example are a [[notify]] it takes") {
  struct NullLogger final : kiwi::Logger {
    void log(kiwi::LogLevel, std::string_view) override {}
  } log;
  kiwi::agent::PluginLoader loader(KIWI_PLUGIN_DIR, log);
  for (const std::string name : {"alertmanager", "webhook", "ntfy"}) {
    const std::string readme = read_text(fixture("../../plugins/" + name + "/README.md"));
    const auto from = readme.find("```toml\n");
    REQUIRE(from != std::string::npos);
    const auto to = readme.find("```", from + 8);
    const std::pair<std::string, std::string> examples[] = {
        {"sample.toml", read_text(fixture("../../plugins/" + name + "/sample.toml"))},
        {"README.md", readme.substr(from + 8, to - from - 8)}};
    for (const auto& [where, toml] : examples) {
      INFO(name << "/" << where);
      const kiwi::agent::Config cfg = kiwi::agent::load_config_text(toml, where, "/x");
      REQUIRE(cfg.notifiers.size() == 1);
      CHECK(cfg.notifiers[0].plugin == name);
      const auto notifier = loader.create_notifier(cfg.notifiers[0], "kiwipi", "0.3.0");
      // Every option with its default, but the url each must be given.
      std::vector<kiwi::OptionSpec> shown;
      for (const auto& o : notifier.library->info->options)
        if (o.key != "url") shown.push_back(o);
      CHECK(kiwi_sensor_test::keys_missing_from(toml, shown).empty());
    }
  }
}

TEST_CASE("plugins: the mqtt sample.toml and README example are an [[mqtt]] it takes") {
  struct NullLogger final : kiwi::Logger {
    void log(kiwi::LogLevel, std::string_view) override {}
  } log;
  kiwi::agent::PluginLoader loader(KIWI_PLUGIN_DIR, log);
  const std::string readme = read_text(fixture("../../plugins/mqtt/README.md"));
  const auto from = readme.find("```toml\n");
  REQUIRE(from != std::string::npos);
  const auto to = readme.find("```", from + 8);
  const std::pair<std::string, std::string> examples[] = {
      {"sample.toml", read_text(fixture("../../plugins/mqtt/sample.toml"))},
      {"README.md", readme.substr(from + 8, to - from - 8)}};
  for (const auto& [where, toml] : examples) {
    INFO("mqtt/" << where);
    const kiwi::agent::Config cfg = kiwi::agent::load_config_text(toml, where, "/x");
    REQUIRE(cfg.outputs.size() == 1);
    CHECK(cfg.outputs[0].table == "mqtt");
    CHECK(cfg.warnings.empty());
    // Made as the agent makes it (its options checked; no connection before the first write).
    const auto output = loader.create_output(cfg.outputs[0], "kiwipi", "0.3.0");
    CHECK(output.library->info->name == std::string_view("mqtt"));
    // Every option with its default, but the url it must be given.
    std::vector<kiwi::OptionSpec> shown;
    for (const auto& o : output.library->info->options)
      if (o.key != "url") shown.push_back(o);
    CHECK(kiwi_sensor_test::keys_missing_from(toml, shown).empty());
  }
  // What it refuses refuses the configuration (a start exits 2, a reload changes nothing).
  const std::pair<std::string, std::string> refused[] = {
      {"url = \"http://broker\"", "is not mqtt://host[:port] or mqtts://host[:port]"},
      {"url = \"mqtt://broker\"\npassword_file = \"/etc/hostname\"",
       "password_file without username"},
      {"url = \"mqtt://broker\"\nca_file = \"/etc/hostname\"", "ca_file is for mqtts:// URLs"},
      {"url = \"mqtts://broker\"\nca_file = \"/nonexistent/ca.pem\"",
       "ca_file \"/nonexistent/ca.pem\": "},
      {"url = \"mqtt://broker\"\nusername = \"kiwi\"\npassword_file = \"/nonexistent/pass\"",
       "/nonexistent/pass"},
      {"url = \"mqtt://broker\"\nnode = \"...\"", "has no letter or digit"},
      {"url = \"mqtt://broker\"\ntopic_prefix = \"kiwi/#\"", "without + or #"},
  };
  for (const auto& [toml, why] : refused) {
    INFO(toml);
    const auto cfg = kiwi::agent::load_config_text("[[mqtt]]\n" + toml + "\n", "kiwi.toml", "/x");
    CHECK_THROWS_WITH(loader.create_output(cfg.outputs.at(0), "kiwipi", "0.3.0"),
                      Catch::Contains("mqtt 'mqtt' refused to start: ") && Catch::Contains(why));
  }
}
