#include "thermal_parse.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <kiwi/io.hpp>
#include <set>

namespace kiwi::thermal {
std::optional<double> parse_millidegrees(std::string_view text) {
  auto milli = to_number<std::int64_t>(kiwi::trim(text));
  if (!milli) return std::nullopt;
  // One correctly rounded division: 45123 gives exactly the double nearest to 45.123.
  return static_cast<double>(*milli) / 1000.0;
}

std::optional<double> parse_state(std::string_view text) {
  const auto state = to_number<std::uint32_t>(kiwi::trim(text));
  return state ? std::optional<double>(*state) : std::nullopt;
}

TripLimit trip_limit(std::string_view type) {
  type = kiwi::trim(type);
  if (type == "critical") return TripLimit::critical;
  if (type == "passive" || type == "hot") return TripLimit::high;
  return TripLimit::none;
}

std::vector<Numbered> select_numbered(std::span<const std::string> names, std::string_view prefix,
                                      std::string_view suffix) {
  std::vector<Numbered> out;
  for (const auto& name : names) {
    std::string_view s = name;
    if (!s.starts_with(prefix) || !s.ends_with(suffix)) continue;
    s = s.substr(prefix.size(), s.size() - prefix.size() - suffix.size());
    if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    if (auto n = to_number<unsigned>(s)) out.push_back({*n, name});
  }
  std::sort(out.begin(), out.end(),
            [](const Numbered& a, const Numbered& b) { return a.number < b.number; });
  return out;
}

std::string hwmon_sensor_name(std::string_view chip, std::string_view label, unsigned index) {
  std::string out(chip);
  if (label.empty()) return out + "_temp" + std::to_string(index);
  return out.append("_").append(label);
}

std::string thermal_zone_hwmon_name(std::string_view zone_type) {
  std::string out(zone_type);
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

void make_unique(std::vector<std::string>& names) {
  std::set<std::string> taken(names.begin(), names.end());
  std::set<std::string> seen;
  for (auto& name : names) {
    if (seen.insert(name).second) continue;
    for (unsigned n = 2;; ++n) {
      std::string candidate = name + "_" + std::to_string(n);
      if (taken.insert(candidate).second) {
        name = std::move(candidate);
        seen.insert(name);
        break;
      }
    }
  }
}

}  // namespace kiwi::thermal
