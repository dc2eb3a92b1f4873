// What an exec sensor's program prints, parsed: the Prometheus text exposition format 0.0.4, or
// the JSON metric objects /api/current shows. Pure functions over text (tests/unit/sensors).
#pragma once

#include <kiwi/sensor.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiwi::exec {

struct Metric {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // in the order the program wrote them
  double value = 0;
  std::string unit;  // one of kiwi::kUnits
  MetricKind kind = MetricKind::gauge;
};

// Where the output is wrong. line and column are 1-based (column in bytes); line 0 means the error
// has no position in the text (a JSON element of the wrong shape: `where` names it then).
struct ParseError {
  std::size_t line = 0;
  std::size_t column = 0;
  std::string where;  // JSON: "[2].value"
  std::string message;
  // "output line 3, column 7: bad number \"x\"", "output [2].value: must be a number"
  std::string str() const;
};

struct Parsed {
  std::vector<Metric> metrics;
  // The text of each # HELP line, unescaped: family (as the line names it), text.
  std::vector<std::pair<std::string, std::string>> help;
  std::optional<ParseError> error;  // set: `metrics` is empty, the whole output is refused
};

// The unit a Prometheus metric name implies by its suffix (for a counter, after `_total`):
// _bytes_per_second, _per_second, _bytes, _seconds, _celsius, _hertz, _ratio, _volts, _amperes,
// _watts, _rpm; else "".
std::string unit_from_name(std::string_view name, bool counter);

// The text format 0.0.4: # HELP / # TYPE lines, other comments ignored, samples with optional
// labels and timestamp (accepted, ignored). TYPE counter -> counter; gauge, untyped or none ->
// gauge; histogram _bucket/_sum/_count and summary _sum/_count -> counters, summary quantiles ->
// gauges (README "Formats").
Parsed parse_prometheus(std::string_view text);

// A JSON array of {"name", "labels"?, "value", "unit", "kind"?} objects, as /api/current shows a
// sensor's metrics.
Parsed parse_json(std::string_view text);

}  // namespace kiwi::exec
