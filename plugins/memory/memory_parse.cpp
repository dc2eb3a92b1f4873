#include "memory_parse.hpp"

#include <algorithm>
#include <charconv>
#include <kiwi/io.hpp>
#include <kiwi/text.hpp>
#include <stdexcept>

namespace kiwi::memory {

std::map<std::string, std::uint64_t, std::less<>> parse_meminfo(std::string_view text) {
  std::map<std::string, std::uint64_t, std::less<>> out;
  for (std::string_view line : kiwi::Lines(text)) {
    std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = kiwi::trim(line.substr(0, colon));
    std::string_view rest = kiwi::trim(line.substr(colon + 1));
    std::uint64_t value = 0;
    auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
    if (key.empty() || ec != std::errc()) continue;
    std::string_view unit = kiwi::trim(rest.substr(ptr - rest.data()));
    if (unit == "kB")
      value *= 1024;
    else if (!unit.empty())
      continue;  // a unit we do not know: better absent than wrong by 1024x
    out.emplace(key, value);
  }
  return out;
}

MemoryStats compute_memory(const std::map<std::string, std::uint64_t, std::less<>>& meminfo,
                           std::optional<std::uint64_t> min_free_kbytes) {
  auto get = [&](std::string_view key) -> std::optional<double> {
    auto it = meminfo.find(key);
    if (it == meminfo.end()) return std::nullopt;
    return static_cast<double>(it->second);
  };
  MemoryStats s;
  s.total_bytes = get("MemTotal");
  if (!s.total_bytes) throw std::invalid_argument("no MemTotal line");
  s.cached_bytes = get("Cached");
  s.buffers_bytes = get("Buffers");
  s.available_bytes = get("MemAvailable");
  if (!s.available_bytes && meminfo.count("MemFree")) {
    // In KiB and integer arithmetic, as procps does, so the number matches `free` exactly.
    auto kib = [&](std::string_view key) -> std::int64_t {
      auto it = meminfo.find(key);
      return it == meminfo.end() ? 0 : static_cast<std::int64_t>(it->second / 1024);
    };
    const std::int64_t low = static_cast<std::int64_t>(min_free_kbytes.value_or(0)) * 5 / 4;
    const std::int64_t page_cache = kib("Active(file)") + kib("Inactive(file)");
    const std::int64_t slab = kib("SReclaimable");
    const std::int64_t available = kib("MemFree") - low + page_cache -
                                   std::min(page_cache / 2, low) + slab - std::min(slab / 2, low);
    s.available_bytes = static_cast<double>(std::max<std::int64_t>(available, 0)) * 1024;
    s.available_estimated = true;
  }
  if (s.available_bytes) {
    s.available_bytes = std::min(*s.available_bytes, *s.total_bytes);
    s.used_bytes = *s.total_bytes - *s.available_bytes;
    if (*s.total_bytes > 0) s.used_ratio = *s.used_bytes / *s.total_bytes;
  }
  s.swap_total_bytes = get("SwapTotal");
  if (auto swap_free = get("SwapFree"); s.swap_total_bytes && swap_free)
    s.swap_used_bytes = std::max(0.0, *s.swap_total_bytes - *swap_free);
  return s;
}

}  // namespace kiwi::memory
