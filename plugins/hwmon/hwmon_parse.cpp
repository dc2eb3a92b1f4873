#include "hwmon_parse.hpp"

#include <cstdint>
#include <kiwi/text.hpp>

namespace kiwi::hwmon {

namespace {

constexpr Kind kKinds[] = {Kind::fan, Kind::pwm, Kind::in, Kind::curr, Kind::power};

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

}  // namespace

std::string_view kind_name(Kind kind) {
  switch (kind) {
    case Kind::fan:
      return "fan";
    case Kind::pwm:
      return "pwm";
    case Kind::in:
      return "in";
    case Kind::curr:
      return "curr";
    case Kind::power:
      return "power";
  }
  return "";
}

std::optional<Attribute> parse_attribute(std::string_view name) {
  for (const Kind kind : kKinds) {
    const std::string_view prefix = kind_name(kind);
    if (!name.starts_with(prefix)) continue;
    std::string_view rest = name.substr(prefix.size());
    std::size_t digits = 0;
    while (digits < rest.size() && is_digit(rest[digits])) ++digits;
    if (digits == 0) continue;  // "in_reset_history", "intrusion0_alarm", "pwmfan"
    if (digits > 1 && rest.front() == '0') return std::nullopt;  // "fan01": not the ABI's
    const auto channel = kiwi::to_number<unsigned>(rest.substr(0, digits));
    if (!channel) return std::nullopt;  // more digits than a channel number has
    rest.remove_prefix(digits);
    if (!rest.empty() && (rest.front() != '_' || rest.size() == 1)) return std::nullopt;
    return Attribute{kind, *channel, rest.empty() ? rest : rest.substr(1)};
  }
  return std::nullopt;
}

std::optional<std::string> alarm_name(Kind kind, std::string_view item) {
  if (item == "alarm") return std::string(kind_name(kind));
  constexpr std::string_view kSuffix = "_alarm";
  if (item.size() <= kSuffix.size() || !item.ends_with(kSuffix)) return std::nullopt;
  return std::string(kind_name(kind)) + "_" +
         std::string(item.substr(0, item.size() - kSuffix.size()));
}

std::optional<double> parse_value(Format format, std::string_view text) {
  const auto n = kiwi::to_number<std::int64_t>(kiwi::trim(text));
  if (!n) return std::nullopt;
  switch (format) {
    case Format::milli:
      return static_cast<double>(*n) / 1e3;
    case Format::micro:
      return static_cast<double>(*n) / 1e6;
    case Format::rpm:
      if (*n < 0) return std::nullopt;
      return static_cast<double>(*n);
    case Format::pwm:
      if (*n < 0 || *n > 255) return std::nullopt;
      return static_cast<double>(*n) / 255.0;
    case Format::flag:
      if (*n != 0 && *n != 1) return std::nullopt;
      return static_cast<double>(*n);
  }
  return std::nullopt;
}

std::string_view format_expected(Format format) {
  switch (format) {
    case Format::milli:
    case Format::micro:
      return "not a whole number";
    case Format::rpm:
      return "not a fan speed (rpm, 0 or more)";
    case Format::pwm:
      return "not a duty cycle (0 to 255)";
    case Format::flag:
      return "not 0 or 1";
  }
  return "not a value";
}

}  // namespace kiwi::hwmon
