// kiwi-agent plugin SDK: the clock and the rule for per-second rates of kernel counters.
//
// A sensor emits the counters it reads (kiwi::counter rows with a `rate`, kiwi/plugin.hpp); the
// agent derives their per-second rates, in one place, with counter_rate() and the clock below.
// A sensor needs them itself only for a value made from a rate (the network sensor's link
// utilisation). Time comes from <procfs>/uptime (as sar and iostat do), so a fixture tree scripts
// it exactly.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiwi/io.hpp"

namespace kiwi {

// The first field of /proc/uptime ("21572.31 162283.33") in whole milliseconds; nullopt if it is
// not a non-negative decimal number.
inline std::optional<std::int64_t> parse_uptime_ms(std::string_view text) {
  std::string_view rest = text;
  std::string_view field = next_field(rest);
  const std::size_t dot = std::min(field.find('.'), field.size());
  auto whole = to_number<std::int64_t>(field.substr(0, dot));
  if (!whole || *whole < 0) return std::nullopt;
  std::string_view fraction = dot < field.size() ? field.substr(dot + 1) : std::string_view{};
  std::int64_t ms = *whole * 1000;
  std::int64_t scale = 100;
  for (char c : fraction) {
    if (c < '0' || c > '9') return std::nullopt;
    ms += (c - '0') * scale;  // digits past milliseconds add 0
    scale /= 10;
  }
  return ms;
}

// An uptime file (<procfs>/uptime) in milliseconds; throws std::runtime_error naming the file if it
// is missing or not a number, and as KeptFile::read for other failures.
inline std::int64_t read_uptime_ms(KeptFile& file) {
  const auto text = file.read();
  const auto ms = text ? parse_uptime_ms(*text) : std::nullopt;
  if (!ms)
    throw std::runtime_error(file.path() + (text ? ": not a number of seconds" : ": not found"));
  return *ms;
}

// The same of <procfs>/uptime, opened for this one read.
inline std::int64_t read_uptime_ms(std::string_view procfs) {
  KeptFile file(join_path(procfs, "uptime"));
  return read_uptime_ms(file);
}

// The per-second rate of a counter read `before` and then `after`, `seconds` apart; nullopt when
// it went backwards (a reset: a driver reloaded, a device re-created; or a counter narrower than
// 64 bits that wrapped, which no reading can tell from a reset) or no time passed. As with
// Prometheus' rate(), a decrease is a reset; unlike it, the interval of the reset has no rate
// rather than a guess, and the new reading is the baseline of the next one.
//
// Counters in seconds are decimals (ticks / 100, milliseconds / 1000) that no double holds
// exactly, so the difference of two carries noise far below the counter's own precision (0.06
// would read 0.0600000000001): unless both readings are integers (bytes, packets: exact), the
// difference is rounded to 13 significant digits of the counter's size.
inline std::optional<double> counter_rate(double before, double after, double seconds) {
  if (after < before || !(seconds > 0)) return std::nullopt;
  double delta = after - before;
  if (std::nearbyint(before) != before || std::nearbyint(after) != after) {
    const double size = std::max(std::fabs(after), 1.0);
    const double scale = std::pow(10.0, 12 - std::floor(std::log10(size)));  // 10^k, k <= 12
    const double rounded = std::nearbyint(delta * scale) / scale;
    if (std::isfinite(rounded)) delta = rounded;
  }
  return delta / seconds;
}

// Seconds between the previous reading and now, when rates can be computed; otherwise nullopt,
// with the reason added to `notes` (the sample's status message).
inline std::optional<double> rate_interval_seconds(std::optional<std::int64_t> previous_ms,
                                                   std::int64_t now_ms,
                                                   std::vector<std::string>& notes) {
  if (!previous_ms) {
    notes.push_back("first sample: rates need two readings");
    return std::nullopt;
  }
  if (now_ms <= *previous_ms) {
    notes.push_back("uptime did not advance since the previous sample, no rates");
    return std::nullopt;
  }
  return static_cast<double>(now_ms - *previous_ms) / 1000.0;
}

}  // namespace kiwi
