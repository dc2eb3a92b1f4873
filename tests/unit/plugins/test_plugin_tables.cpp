// Every sensor plugin against its own tables, on every fixture board: what it emits is declared in
// its MetricSpec table (the HELP text of /metrics) with the same unit and labels, every declared
// metric shows up on some board, and its sample.toml and README show the option table's defaults.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "cpu_sensor.hpp"
#include "diskio_sensor.hpp"
#include "memory_sensor.hpp"
#include "network_sensor.hpp"
#include "plugin/metric_check.hpp"
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
};

constexpr std::string_view kBoards[] = {"rk3588", "rpi4", "vm", "x86", "awkward"};

std::set<std::string> label_names(std::string_view comma_list) {
  std::set<std::string> out;
  while (!comma_list.empty()) {
    const auto comma = std::min(comma_list.find(','), comma_list.size());
    out.emplace(comma_list.substr(0, comma));
    comma_list.remove_prefix(std::min(comma + 1, comma_list.size()));
  }
  return out;
}

std::string_view type_word(kiwi::OptionType type) {
  switch (type) {
    case kiwi::OptionType::boolean:
      return "boolean";
    case kiwi::OptionType::integer:
      return "integer";
    case kiwi::OptionType::number:
      return "number";
    case kiwi::OptionType::string:
      return "string";
    case kiwi::OptionType::string_list:
      return "string list";
    case kiwi::OptionType::duration:
      return "duration";
    case kiwi::OptionType::size:
      return "size";
    case kiwi::OptionType::string_table:
      return "table of strings";
  }
  return "?";
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
          "| `" + std::string(option.key) + "` | " + std::string(type_word(option.type)) + " |";
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
