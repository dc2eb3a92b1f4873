// Pure parts of /api/history: parameter parsing and the columnar JSON rendering.
#pragma once

#include <kiwi/handler.hpp>
#include <variant>

namespace kiwi_history {

inline constexpr std::size_t kDefaultLimit = 120;
inline constexpr std::size_t kMaxLimit = 86400;

struct ParamError {
  std::string parameter;
  std::string message;
};

// Checks every query parameter; the query to run, or the first error (400).
std::variant<kiwi::HistoryQuery, ParamError> parse_query(const kiwi::Request& req);

// {"version":1,"count":N,"timestamps":[...],"series":{"<key>":{"name":..,"labels":{..},
//  "unit":..,"values":[...]}}}  -- missing values are null.
std::string render(const kiwi::HistoryResult& result);

}  // namespace kiwi_history
