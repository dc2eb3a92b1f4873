// Pure helpers for the thermal sensor: millidegree text, trip points and sensor names (numbered
// sysfs entries and unique names are the SDK's, kiwi/sysfs.hpp). No file I/O here, so every
// function is tested on fixture text (tests/unit/plugins/).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kiwi::thermal {

// sysfs temperatures are integer millidegrees Celsius ("45250\n", may be negative). Returns the
// value in degrees Celsius (45.25), or nullopt if the text is not an integer.
std::optional<double> parse_millidegrees(std::string_view text);

// An hwmon limit (tempN_crit, tempN_max) as a limit: nullopt for the 8-bit register's ends,
// 127 °C and above or -128 °C and below, which Super I/O drivers (it87, nct6775) show for a limit
// nobody set.
std::optional<double> hwmon_limit(std::optional<double> celsius);

// A cooling device's cur_state or max_state: a whole number ("3\n"); nullopt for anything else.
std::optional<double> parse_state(std::string_view text);

// Which limit a thermal zone's trip point of this type (trip_point_N_type) is: "critical" is the
// critical limit, "passive" and "hot" the high one (where the kernel starts cooling by slowing
// down, or warns); "active" (a fan's steps) and anything else are neither.
enum class TripLimit { none, critical, high };
TripLimit trip_limit(std::string_view type);

// The sensor label of an hwmon temperature: chip + "_" + label ("coretemp_Core 0"), or without a
// label chip + "_temp" + index ("iwlwifi_1_temp1").
std::string hwmon_sensor_name(std::string_view chip, std::string_view label, unsigned index);

// The hwmon chip name the kernel gives a thermal zone it mirrors into hwmon
// (CONFIG_THERMAL_HWMON): the zone type with '-' replaced by '_' ("cpu-thermal" -> "cpu_thermal").
// Such chips are skipped so a zone is not reported twice.
std::string thermal_zone_hwmon_name(std::string_view zone_type);

}  // namespace kiwi::thermal
