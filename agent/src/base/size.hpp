// Sizes as people write them in the TOML, beside durations (duration.hpp): "512", "64KiB", "1MiB".
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kiwi::agent {

// Bytes from digits and an optional unit: none or "B" (bytes), "KiB", "MiB", "GiB", "TiB"
// (powers of 1024), "kB", "MB", "GB", "TB" (powers of 1000). nullopt for anything else (empty,
// a sign, a fraction, a space, another unit, more than 2^53 bytes).
std::optional<std::uint64_t> parse_size(std::string_view text);

}  // namespace kiwi::agent
