// A board's row of /api/fleet: what it says of itself (from its latest snapshot and alerts), read
// back from a peer's answer, and written as JSON. Pure functions: unit-tested on their own
// (tests/unit/handlers/test_fleet.cpp).
#pragma once

#include <cstdint>
#include <kiwi/model.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiwi_fleet {

// Firing alert names kept in a row at most (the count is exact).
inline constexpr std::size_t kMaxAlertNames = 20;
// A text from a peer (its host name, a zone, a mount, an alert's name) kept at most, in bytes.
inline constexpr std::size_t kMaxText = 128;

struct Temperature {
  double celsius = 0;
  std::string zone;  // the thermal_celsius `sensor` label
};
struct Filesystem {
  std::string mount;
  double used_ratio = 0;
};
struct Power {
  bool under_voltage = false;  // power_throttle_flag{flag="under_voltage",when="now"}
  bool throttled = false;      // ... throttled, frequency_capped or soft_temperature_limit, now
};

// What a board says of itself.
struct BoardValues {
  std::string host;  // its host name
  std::string agent_version;
  bool stale = false;                      // its newest sample is older than its stale_after
  double timestamp_ms = 0;                 // its newest sample (its own clock)
  std::int64_t age_ms = 0;                 // how old that sample was when the row was made
  std::optional<double> cpu_ratio;         // cpu_usage_ratio
  std::optional<Temperature> temperature;  // the hottest thermal_celsius
  std::optional<double> memory_ratio;      // memory_used_ratio
  std::optional<Filesystem> filesystem;    // the fullest storage_used_ratio
  std::optional<Power> power;              // none without a power_throttle_flag series
  std::size_t firing = 0;
  std::vector<std::string> alert_names;  // of the firing ones, at most kMaxAlertNames, sorted
};

// This board's values from its snapshot and alerts, at `now_ms` (unix milliseconds).
BoardValues board_values(const kiwi::Snapshot& snapshot, std::span<const kiwi::Alert> alerts,
                         double now_ms);

// How a row came to be: this board, or a peer and how its last fetch went.
struct RowMeta {
  std::string_view name;
  bool self = false;
  std::string_view url;                // a peer's; "" for this board
  std::string_view status;             // "up", "stale", "unreachable", "auth_failed"
  std::string_view error;              // why not up ("" when up)
  std::optional<double> last_seen_ms;  // none: never reached
};

// Appends one board's row, a JSON object; `values` none: a peer never reached (its values null).
void append_row(std::string& out, const RowMeta& meta, const BoardValues* values);

// A peer's answer to /api/fleet?scope=self: its row, checked member by member (a number where a
// number belongs, texts cut at kMaxText, names at kMaxAlertNames). nullopt with `why` when the
// answer is not such a row.
std::optional<BoardValues> parse_self_answer(std::string_view body, std::string& why);

}  // namespace kiwi_fleet
