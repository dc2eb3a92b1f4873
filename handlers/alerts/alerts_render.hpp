// Pure parts of /api/alerts: the query's filter and the JSON of the alert instances.
#pragma once

#include <cstdint>
#include <kiwi/handler.hpp>
#include <string>
#include <variant>
#include <vector>

namespace kiwi_alerts {

struct ParamError {
  std::string parameter;
  std::string message;
};

// Which instances a request asks for: a bit per kiwi::AlertState and per kiwi::Severity (1 << its
// code); every bit set where the request names none.
struct Filter {
  static constexpr std::uint32_t kAllStates = (1u << 1) | (1u << 2) | (1u << 3);  // not inactive
  static constexpr std::uint32_t kAllSeverities = (1u << 0) | (1u << 1) | (1u << 2);
  std::uint32_t states = kAllStates;
  std::uint32_t severities = kAllSeverities;
  bool matches(const kiwi::Alert& a) const;
  // A number below kSlots naming this filter (for a cache of one response per filter).
  std::size_t slot() const { return (states >> 1) * 8 + severities; }
  static constexpr std::size_t kSlots = 64;
};

// Reads `state` (firing, pending, resolved) and `severity` (critical, warning, info), each a
// comma list. Returns the filter, or the first error (a 400 naming the parameter): an unknown
// parameter, one given twice or empty, an empty item or a word it does not know.
std::variant<Filter, ParamError> parse_filter(const kiwi::Request& req);

// {"version":1,"timestamp":T,"firing":F,"pending":P,"alerts":[{"name":..,"state":..,
//  "severity":..,"summary":..,"labels":{..},"sensor":..,"series":..,"value":..,"threshold":..,
//  "since":..,"active_at":..}]}: the instances `filter` matches, in the order given (the engine's:
// firing first). `firing` and `pending` count every instance, whatever the filter. `timestamp` is
// the latest sample's (null before the first: 0); a value or threshold that is NaN, and an
// active_at of 0, are null.
std::string render(const std::vector<kiwi::Alert>& alerts, const Filter& filter, double timestamp);

}  // namespace kiwi_alerts
