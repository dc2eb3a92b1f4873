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

// The body's format (`format=`): columnar JSON, or CSV (one row per timestamp).
enum class Format { json, csv };

struct ParsedQuery {
  kiwi::HistoryQuery query;
  Format format = Format::json;
  std::string canonical;  // the parameters in one fixed order, for caching and the ETag
  bool relative = false;  // since or until was given relative to now: the URL names no fixed window
};

// The `default_series` option: the series a request without `series=` gets. The headline series
// the dashboard charts; everything stays one `series=*` away. Keeps the common response small
// (the lab this replaces sent 74 kB for 120 samples).
inline constexpr kiwi::OptionSpec kOptions[] = {
    {"default_series", kiwi::OptionType::string_list,
     R"(["cpu_usage_ratio", "cpu_load1", "thermal_max_celsius", "memory_used_ratio", "memory_used_bytes", "memory_swap_used_bytes", "storage_used_ratio", "network_*_bytes_per_second", "diskio_*_bytes_per_second"])",
     "series (names, keys or `*` globs) returned when a request has no series parameter; [\"*\"] "
     "for all"}};

// Checks every query parameter against `now` (unix seconds) and the series the store knows.
// Returns the query to run, or the first error (a 400 naming the parameter). Without `series`,
// the query selects `default_series`.
std::variant<ParsedQuery, ParamError> parse_query(
    const kiwi::Request& req, double now, const std::vector<std::string>& known_series,
    const std::vector<std::string>& default_series = {});

// An absolute time: unix seconds as plain digits with an optional fraction ("1764475800",
// "1764475800.5"; no sign, no exponent) or RFC 3339 ("2026-11-30T05:00:00Z",
// "2026-11-30T06:00:00.25+01:00", a space allowed for the 'T'). No range check.
std::optional<double> parse_time(std::string_view text);

// Absolute times `since` and `until` accept: from 2000-01-01T00:00:00Z to a day after now.
inline constexpr double kEarliestTime = 946684800;  // 2000-01-01T00:00:00Z
inline constexpr double kLatestAfterNow = 86400;

// A `since` or `until` value: an absolute time (parse_time, within the range above) or negative
// seconds, meaning that long before `now` ("-300", "-0.5"). Returns the unix time, or why the
// text is not one (a message for a 400 that names the parameter).
std::variant<double, std::string> parse_time_param(std::string_view text, double now);

// Decimal places a unit needs in JSON: bytes and hertz are whole, ratios 4 places, etc.
int decimals_for_unit(std::string_view unit);

// {"version":1,"count":N,["step":S,"agg":"mean",]"timestamps":[...],"series":{"<key>":{"name":..,
//  "labels":{..},"unit":..,"values":[...][,"min":[...],"max":[...]]}}}  -- missing values are
// null; min and max with query.band.
std::string render(const kiwi::HistoryResult& result, const kiwi::HistoryQuery& query);

// RFC 4180 CSV, CRLF line ends: a header `timestamp,<key>[,<key>:min,<key>:max],...` (a field
// with a comma, a quote or a line break in double quotes, its quotes doubled), then a row per
// timestamp: unix seconds and each value as render() writes it, empty where it has none.
std::string render_csv(const kiwi::HistoryResult& result, const kiwi::HistoryQuery& query);

// The Content-Type of a body in `format`.
std::string_view content_type(Format format);

}  // namespace kiwi_history
