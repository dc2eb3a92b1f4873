// The hwmon sensor: every hwmon chip's fans (speed, minimum, duty cycle), voltages, currents and
// power, and each of those channels' alarms. Temperatures are the thermal sensor's. See README.md.
#pragma once

#include <chrono>
#include <kiwi/attributes.hpp>
#include <kiwi/glob.hpp>
#include <kiwi/io.hpp>
#include <kiwi/sensor.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hwmon_parse.hpp"

namespace kiwi::hwmon {

// The one place the hwmon options and their defaults are declared (plugin.cpp registers it; the
// host fills in defaults; tests build Options from it).
inline constexpr kiwi::OptionSpec kOptions[] = {
    {"exclude", kiwi::OptionType::string_list, "[]",
     "channels not to report, as chip/sensor (\"it8613/in4\") or globs (\"it8613/*\", \"*/fan3\")"},
};

// Every metric the sensor may emit, each declared once: `chip` is the chip's name (made unique:
// nct6798, nvme_2), `sensor` the channel's label or its attribute prefix (fan2, in0).
inline constexpr kiwi::MetricSpec kFanRpm =
    kiwi::gauge("hwmon_fan_rpm", kiwi::Unit::rpm, "chip,sensor",
                "a fan's speed, revolutions per minute (<sysfs>/class/hwmon/hwmonN/fanM_input)");
inline constexpr kiwi::MetricSpec kFanMinRpm =
    kiwi::gauge("hwmon_fan_min_rpm", kiwi::Unit::rpm, "chip,sensor",
                "the speed below which the chip raises the fan's alarm, 0 when none is set "
                "(fanM_min)");
inline constexpr kiwi::MetricSpec kPwmRatio =
    kiwi::gauge("hwmon_pwm_ratio", kiwi::Unit::ratio, "chip,sensor",
                "a fan output's duty cycle, 0 to 1 (pwmM, 0 to 255)");
inline constexpr kiwi::MetricSpec kVolts =
    kiwi::gauge("hwmon_volts", kiwi::Unit::volts, "chip,sensor",
                "a voltage as the chip measures it at its pin (inM_input, millivolts); a "
                "divided-down rail reads low until scaled");
inline constexpr kiwi::MetricSpec kAmperes = kiwi::gauge(
    "hwmon_amperes", kiwi::Unit::amperes, "chip,sensor", "a current (currM_input, milliamperes)");
inline constexpr kiwi::MetricSpec kWatts =
    kiwi::gauge("hwmon_watts", kiwi::Unit::watts, "chip,sensor",
                "a power (powerM_input, or powerM_average where the chip has no input; "
                "microwatts)");
inline constexpr kiwi::MetricSpec kAlarm = kiwi::gauge(
    "hwmon_alarm", kiwi::Unit::none, "alarm,chip,sensor",
    "1 while the chip raises the channel's alarm, else 0 (alarm: the channel's kind and the limit, "
    "as the file names them: fan, fan_min, in, in_lcrit, curr_max, power_cap, ...; "
    "<kind>M[_<limit>]_alarm)");
inline constexpr kiwi::MetricSpec kMetricSpecs[] = {kFanRpm,  kFanMinRpm, kPwmRatio, kVolts,
                                                    kAmperes, kWatts,     kAlarm};

class HwmonSensor final : public kiwi::Sensor {
 public:
  // Copies the sysfs root and options; reads nothing. Channels are listed at the first sample and
  // again every kRediscoverEvery (a USB fan controller plugged in later shows up), or at the next
  // sample when one of their files went away.
  explicit HwmonSensor(const kiwi::SensorContext& ctx);

  kiwi::SampleResult sample(kiwi::MetricSink& sink) override;

  // Listing the chips reads a directory and the labels of each: not worth doing every second.
  static constexpr std::chrono::seconds kRediscoverEvery{10};

 private:
  // One file read each sample and the series it gives.
  struct Reading {
    const kiwi::MetricSpec* spec;
    Format format;
    std::string chip, sensor, alarm;  // labels (alarm: kAlarm's only)
    kiwi::KeptFile file;
  };
  struct Found {
    std::vector<Reading> readings;
    std::size_t excluded = 0;        // channels the exclude option left out
    std::vector<std::string> notes;  // labels that could not be read
  };
  Found discover() const;

  std::string sysfs_;
  kiwi::NameFilter filter_;  // everything but the exclude option
  kiwi::Logger& log_;
  kiwi::AttributeReads problems_;  // this sample's broken files, logged when they change
  Found found_;                    // as discovered at discovered_at_
  std::optional<std::chrono::steady_clock::time_point> discovered_at_;
};

}  // namespace kiwi::hwmon
