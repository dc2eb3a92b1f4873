// Pure parts of /api/history: parameter parsing and the columnar JSON rendering.
#pragma once

#include <kiwi/handler.hpp>
#include <variant>

namespace kiwi_history {

inline constexpr std::size_t kDefaultLimit = 120;     // points when neither since nor step is given
inline constexpr std::size_t kMaxLimit = 86400;       // raw samples in one response
inline constexpr std::size_t kMaxStepPoints = 10000;  // buckets in one downsampled response

struct ParamError {
  std::string parameter;
  std::string message;
};

struct ParsedQuery {
  kiwi::HistoryQuery query;
  std::string canonical;  // the parameters in one fixed order, for caching and the ETag
};

// Checks every query parameter against `now` (unix seconds) and the series the store knows.
// Returns the query to run, or the first error (a 400 naming the parameter).
std::variant<ParsedQuery, ParamError> parse_query(const kiwi::Request& req, double now,
                                                  const std::vector<std::string>& known_series);

// "1764475800", "1764475800.5", "2026-11-30T05:00:00Z", "2026-11-30T06:00:00.25+01:00".
std::optional<double> parse_time(std::string_view text);

// Decimal places a unit needs in JSON: bytes and hertz are whole, ratios 4 places, etc.
int decimals_for_unit(std::string_view unit);

// {"version":1,"count":N,["step":S,"agg":"mean",]"timestamps":[...],"series":{"<key>":{"name":..,
//  "labels":{..},"unit":..,"values":[...]}}}  -- missing values are null.
std::string render(const kiwi::HistoryResult& result, const kiwi::HistoryQuery& query);

}  // namespace kiwi_history
