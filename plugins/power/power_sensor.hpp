// The power sensor: whether a Raspberry Pi is under-powered or throttled, now and since boot (the
// firmware's throttling word), and the rpi_volt hwmon's under-voltage alarm. See README.md.
#pragma once

#include <kiwi/sensor.hpp>
#include <string>

namespace kiwi::power {

inline constexpr kiwi::MetricSpec kFlag = kiwi::gauge(
    "power_throttle_flag", kiwi::Unit::none, "flag,when",
    "1 when the Raspberry Pi firmware reports the condition (flag: under_voltage, "
    "frequency_capped, throttled, soft_temperature_limit), now or since boot (when), else 0 "
    "(<sysfs>/devices/platform/soc/soc:firmware/get_throttled)");
inline constexpr kiwi::MetricSpec kAlarm = kiwi::gauge(
    "power_under_voltage_alarm", kiwi::Unit::none, "",
    "1 while the supply is below its limit, as the rpi_volt hwmon reports it (in0_lcrit_alarm)");

inline constexpr kiwi::MetricSpec kMetrics[] = {kFlag, kAlarm};

class PowerSensor final : public kiwi::Sensor {
 public:
  // Copies the sysfs root; reads nothing. The plugin has no options.
  explicit PowerSensor(const kiwi::SensorContext& ctx);

  kiwi::SampleResult sample(kiwi::MetricSink& sink) override;

 private:
  std::string sysfs_;
};

}  // namespace kiwi::power
