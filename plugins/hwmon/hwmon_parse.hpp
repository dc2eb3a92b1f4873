// Pure functions for the hwmon sensor: the names and the text of <sysfs>/class/hwmon/hwmonN/
// attributes (the kernel's Documentation/hwmon/sysfs-interface.rst). No file I/O, so each is tested
// on fixture text.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kiwi::hwmon {

// The channel types this sensor reads, in the order it reports them. Temperatures (temp) are the
// thermal sensor's.
enum class Kind { fan, pwm, in, curr, power };

// The attribute prefix of a kind: "fan", "pwm", "in", "curr", "power".
std::string_view kind_name(Kind kind);

// An attribute's name taken apart, as the ABI names them: <kind><channel>[_<item>].
//   "fan2_input" -> fan, 2, "input"    "in0_lcrit_alarm" -> in, 0, "lcrit_alarm"
//   "pwm1"       -> pwm, 1, ""         "power1_average"  -> power, 1, "average"
struct Attribute {
  Kind kind;
  unsigned channel;
  std::string_view item;  // a view into the name given
};
// nullopt for the attributes of other kinds (temp1_input, intrusion0_alarm), of no channel
// (name, in_reset_history, alarms) and anything else.
std::optional<Attribute> parse_attribute(std::string_view name);

// The `alarm` label of a *_alarm item: the kind, and the limit when the item names one.
//   fan, "alarm" -> "fan"     in, "lcrit_alarm" -> "in_lcrit"     power, "cap_alarm" -> "power_cap"
// nullopt when the item is not an alarm (input, min, enable, beep).
std::optional<std::string> alarm_name(Kind kind, std::string_view item);

// How an attribute's text becomes a value in base units. sysfs values are whole numbers in a
// fixed unit (the ABI's "fixed point"):
//   milli  millivolts (inN_input) or milliamperes (currN_input) -> volts, amperes (/ 1000)
//   micro  microwatts (powerN_input, powerN_average) -> watts (/ 10^6)
//   rpm    revolutions per minute (fanN_input, fanN_min), 0 or more
//   pwm    a duty cycle from 0 to 255 (pwmN) -> a ratio (/ 255)
//   flag   an alarm: 0 or 1
enum class Format { milli, micro, rpm, pwm, flag };

// The value of `text` (one number and a newline, as the kernel writes it) in `format`; nullopt
// when it is not one: not a whole number, a negative speed (it87 writes -1 when it has no
// reading), a duty cycle over 255, an alarm other than 0 or 1. Each conversion is one correctly
// rounded division: 3344 mV is exactly the double nearest to 3.344 V.
std::optional<double> parse_value(Format format, std::string_view text);

// What a text that parse_value() refused should have been, for a message: "not a whole number",
// "not a fan speed (rpm, 0 or more)", "not a duty cycle (0 to 255)", "not 0 or 1".
std::string_view format_expected(Format format);

}  // namespace kiwi::hwmon
