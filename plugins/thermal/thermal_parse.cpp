#include "thermal_parse.hpp"

#include <algorithm>
#include <cstdint>
#include <kiwi/io.hpp>

namespace kiwi::thermal {
std::optional<double> parse_millidegrees(std::string_view text) {
  auto milli = to_number<std::int64_t>(kiwi::trim(text));
  if (!milli) return std::nullopt;
  // One correctly rounded division: 45123 gives exactly the double nearest to 45.123.
  return static_cast<double>(*milli) / 1000.0;
}

std::optional<double> hwmon_limit(std::optional<double> celsius) {
  if (celsius && (*celsius >= 127.0 || *celsius <= -128.0)) return std::nullopt;
  return celsius;
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

}  // namespace kiwi::thermal
