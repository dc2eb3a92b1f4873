// Durations as people write them in the TOML: "500ms", "1s", "5m", "24h", "7d", "1h30m".
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace kiwi::agent {

using Millis = std::chrono::milliseconds;

// nullopt for anything else (empty, negative, no unit, unknown unit, overflow).
std::optional<Millis> parse_duration(std::string_view text);
// The shortest exact spelling: 1500ms -> "1500ms", 86400000 -> "24h", 90000 -> "90s".
std::string format_duration(Millis d);

}  // namespace kiwi::agent
