// Test helpers for sensor plugins: a recording MetricSink and Logger, Options built from a plugin's
// own option table (so tests use the real defaults), fixture paths and scratch copies of fixture
// trees for tests that change a file between samples.
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <kiwi/plugin.hpp>
#include <kiwi/sensor.hpp>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/duration.hpp"
#include "base/size.hpp"
#include "plugin/metric_check.hpp"

#ifndef KIWI_FIXTURES_DIR
#error "the test build defines KIWI_FIXTURES_DIR as the absolute path of tests/fixtures"
#endif

namespace kiwi_sensor_test {

inline std::string fixture(std::string_view relative) {
  return std::string(KIWI_FIXTURES_DIR) + "/" + std::string(relative);
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// ---------------------------------------------------------------------------------------------
// Recording sink and logger.

struct Recorded {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
  std::string unit;
  kiwi::MetricKind kind = kiwi::MetricKind::gauge;
};

class RecordingSink final : public kiwi::MetricSink {
 public:
  using kiwi::MetricSink::emit;
  void emit(const kiwi::MetricSpec& metric, std::span<const kiwi::Label> labels,
            double value) override {
    Recorded r{std::string(metric.name),
               {},
               value,
               std::string(kiwi::to_string(metric.unit)),
               metric.kind};
    for (const auto& l : labels) r.labels[std::string(l.name)] = std::string(l.value);
    samples.push_back(std::move(r));
  }

  // The one sample with this name and exactly these labels, if any.
  const Recorded* find(std::string_view name,
                       const std::map<std::string, std::string>& labels = {}) const {
    for (const auto& s : samples)
      if (s.name == name && s.labels == labels) return &s;
    return nullptr;
  }
  std::optional<double> value(std::string_view name,
                              const std::map<std::string, std::string>& labels = {}) const {
    const Recorded* r = find(name, labels);
    return r ? std::optional<double>(r->value) : std::nullopt;
  }
  std::size_t count(std::string_view name) const {
    return static_cast<std::size_t>(std::count_if(
        samples.begin(), samples.end(), [&](const Recorded& s) { return s.name == name; }));
  }
  // Values of one label over the samples of `name`, in emit order.
  std::vector<std::string> label_values(std::string_view name, const std::string& label) const {
    std::vector<std::string> out;
    for (const auto& s : samples)
      if (s.name == name && s.labels.count(label)) out.push_back(s.labels.at(label));
    return out;
  }
  void clear() { samples.clear(); }

  std::vector<Recorded> samples;
};

class RecordingLogger final : public kiwi::Logger {
 public:
  void log(kiwi::LogLevel level, std::string_view message) override {
    lines.emplace_back(level, std::string(message));
  }
  std::size_t count(kiwi::LogLevel level) const {
    return static_cast<std::size_t>(
        std::count_if(lines.begin(), lines.end(), [&](const auto& l) { return l.first == level; }));
  }
  std::vector<std::pair<kiwi::LogLevel, std::string>> lines;
};

// ---------------------------------------------------------------------------------------------
// Options from a plugin's option table: parses the default_toml literals the tables use (true,
// false, integers, numbers, "strings", arrays of strings), as the host would fill them in.

namespace detail {

inline void skip_space(std::string_view& s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) {
    s.remove_prefix(1);
  }
}

inline std::string take_string(std::string_view& s, std::string_view whole) {
  skip_space(s);
  if (s.empty() || s.front() != '"')
    throw std::invalid_argument("expected a string in " + std::string(whole));
  s.remove_prefix(1);
  std::string out;
  while (!s.empty() && s.front() != '"') {
    if (s.front() == '\\' && s.size() > 1) s.remove_prefix(1);
    out.push_back(s.front());
    s.remove_prefix(1);
  }
  if (s.empty()) throw std::invalid_argument("unterminated string in " + std::string(whole));
  s.remove_prefix(1);
  return out;
}

}  // namespace detail

inline kiwi::OptionValue default_value(const kiwi::OptionSpec& spec) {
  kiwi::OptionValue v;
  v.key = std::string(spec.key);
  v.type = spec.type;
  std::string_view text = spec.default_toml;
  detail::skip_space(text);
  switch (spec.type) {
    case kiwi::OptionType::boolean:
      v.boolean = text.starts_with("true");
      break;
    case kiwi::OptionType::integer:
      v.integer = std::stoll(std::string(text));
      break;
    case kiwi::OptionType::number:
      v.number = std::stod(std::string(text));
      break;
    case kiwi::OptionType::string:
      v.string = detail::take_string(text, spec.default_toml);
      break;
    case kiwi::OptionType::string_list:
      if (text.empty() || text.front() != '[')
        throw std::invalid_argument("expected an array: " + std::string(spec.default_toml));
      text.remove_prefix(1);
      for (detail::skip_space(text); !text.empty() && text.front() != ']';
           detail::skip_space(text)) {
        v.string_list.push_back(detail::take_string(text, spec.default_toml));
        detail::skip_space(text);
        if (!text.empty() && text.front() == ',') text.remove_prefix(1);
      }
      break;
    case kiwi::OptionType::string_table:  // no sensor has one; "{}" is the only default read
      break;
    case kiwi::OptionType::duration:  // the host's parsers, as the loader uses them
      v.duration =
          kiwi::agent::parse_duration(detail::take_string(text, spec.default_toml)).value();
      break;
    case kiwi::OptionType::size:
      v.size = kiwi::agent::parse_size(text.starts_with('"')
                                           ? detail::take_string(text, spec.default_toml)
                                           : std::string(text))
                   .value();
      break;
  }
  return v;
}

inline std::vector<kiwi::OptionValue> default_values(std::span<const kiwi::OptionSpec> table) {
  std::vector<kiwi::OptionValue> out;
  for (const auto& spec : table) out.push_back(default_value(spec));
  return out;
}

// Replaces one option's value (the key must be in the table), as a user's TOML would.
inline std::vector<kiwi::OptionValue> with(std::vector<kiwi::OptionValue> values,
                                           std::string_view key, kiwi::OptionValue value) {
  for (auto& v : values)
    if (v.key == key) {
      value.key = v.key;
      value.type = v.type;
      v = std::move(value);
      return values;
    }
  throw std::invalid_argument("no option " + std::string(key));
}
inline std::vector<kiwi::OptionValue> with_strings(std::vector<kiwi::OptionValue> values,
                                                   std::string_view key,
                                                   std::vector<std::string> list) {
  kiwi::OptionValue v;
  v.string_list = std::move(list);
  return with(std::move(values), key, std::move(v));
}
inline std::vector<kiwi::OptionValue> with_bool(std::vector<kiwi::OptionValue> values,
                                                std::string_view key, bool b) {
  kiwi::OptionValue v;
  v.boolean = b;
  return with(std::move(values), key, std::move(v));
}
inline std::vector<kiwi::OptionValue> with_int(std::vector<kiwi::OptionValue> values,
                                               std::string_view key, std::int64_t i) {
  kiwi::OptionValue v;
  v.integer = i;
  return with(std::move(values), key, std::move(v));
}
inline std::vector<kiwi::OptionValue> with_duration(std::vector<kiwi::OptionValue> values,
                                                    std::string_view key,
                                                    std::chrono::milliseconds d) {
  kiwi::OptionValue v;
  v.duration = d;
  return with(std::move(values), key, std::move(v));
}
inline std::vector<kiwi::OptionValue> with_string(std::vector<kiwi::OptionValue> values,
                                                  std::string_view key, std::string s) {
  kiwi::OptionValue v;
  v.string = std::move(s);
  return with(std::move(values), key, std::move(v));
}

// Keys of `table` whose `key = default` does not appear in `toml_text` (whitespace and # comments
// ignored), so a sample.toml or a README's example cannot drift from the one table of defaults.
inline std::vector<std::string> keys_missing_from(std::string_view toml_text,
                                                  std::span<const kiwi::OptionSpec> table) {
  auto squash = [](std::string_view s) {
    std::string out;
    bool comment = false;
    for (char c : s) {
      if (c == '\n') comment = false;
      if (c == '#') comment = true;
      if (!comment && c != ' ' && c != '\t' && c != '\n' && c != '\r') out.push_back(c);
    }
    return out;
  };
  const std::string text = squash(toml_text);
  std::vector<std::string> missing;
  for (const auto& spec : table)
    if (text.find(squash(std::string(spec.key) + "=" + std::string(spec.default_toml))) ==
        std::string::npos)
      missing.emplace_back(spec.key);
  return missing;
}

inline std::vector<std::string> keys_missing_from_sample_toml(
    std::string_view plugin, std::span<const kiwi::OptionSpec> table) {
  return keys_missing_from(
      read_text(fixture("../../plugins/" + std::string(plugin) + "/sample.toml")), table);
}

// ---------------------------------------------------------------------------------------------
// Everything a sensor constructor needs, pointing at a fixture board by default.

struct Harness {
  explicit Harness(const std::string& root, std::vector<kiwi::OptionValue> values = {})
      : procfs(root + "/proc"), sysfs(root + "/sys"), options(std::move(values)) {}

  kiwi::SensorContext context() {
    return {"test", procfs, sysfs, options, log, [this] { ++keep_loaded_calls; }};
  }

  // One sample as the agent takes it (kiwi::agent::call_sensor): every metric checked, the rates
  // of the counters derived on <procfs>/uptime, the message with the agent's notes. The metrics
  // are added to `sink`; an error throws std::runtime_error with the message, as sample() would.
  kiwi::SampleResult sample(kiwi::Sensor& sensor) {
    auto call = kiwi::agent::call_sensor(sensor, rates, procfs);
    if (!call.rates_log.empty())
      log.log(call.rates_log_repeats ? kiwi::LogLevel::debug : kiwi::LogLevel::info,
              call.rates_log);
    if (call.state == kiwi::SensorState::error) throw std::runtime_error(call.message);
    for (const auto& m : call.metrics) {
      Recorded r{m.name, {}, m.value, m.unit, m.kind};
      for (const auto& [name, value] : m.labels) r.labels[name] = value;
      sink.samples.push_back(std::move(r));
    }
    if (!call.dropped_note.empty())
      call.message += (call.message.empty() ? "" : "; ") + call.dropped_note;
    return {
        call.state == kiwi::SensorState::ok ? kiwi::SampleStatus::ok : kiwi::SampleStatus::no_data,
        call.message};
  }

  std::string procfs;
  std::string sysfs;
  kiwi::Options options;
  RecordingLogger log;
  RecordingSink sink;
  kiwi::agent::RateDeriver rates;         // the agent's, for sample()
  std::atomic<int> keep_loaded_calls{0};  // SensorContext::keep_loaded
};

// A scratch copy of a fixture board (or an empty tree) that a test may change between samples.
// Removed again when the test ends.
class ScratchTree {
 public:
  explicit ScratchTree(std::string_view board = {}) {
    std::string pattern = (std::filesystem::temp_directory_path() / "kiwi-test-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    root_ = pattern;
    if (!board.empty())
      std::filesystem::copy(fixture(board), root_, std::filesystem::copy_options::recursive);
  }
  ~ScratchTree() {
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }
  ScratchTree(const ScratchTree&) = delete;
  ScratchTree& operator=(const ScratchTree&) = delete;

  const std::string& root() const { return root_; }
  // Writes (creating parent directories) a file relative to the root.
  void write(const std::string& relative, std::string_view content) const {
    const auto path = std::filesystem::path(root_) / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
  }
  // Copies <board>/next/ over the tree: the board's files one second later (see
  // tests/fixtures/README.md), so the next sample sees exact, hand-computed deltas.
  void advance(std::string_view board) const {
    std::filesystem::copy(fixture(std::string(board) + "/next"), root_,
                          std::filesystem::copy_options::recursive |
                              std::filesystem::copy_options::overwrite_existing);
  }
  void remove(const std::string& relative) const {
    std::filesystem::remove_all(std::filesystem::path(root_) / relative);
  }
  // Replaces a file by a directory, so open() works and read() fails with EISDIR: a stand-in for
  // a sensor whose read returns EIO, which plain files cannot fake (and which works as root).
  void make_unreadable(const std::string& relative) const {
    remove(relative);
    std::filesystem::create_directories(std::filesystem::path(root_) / relative);
  }

 private:
  std::string root_;
};

}  // namespace kiwi_sensor_test
