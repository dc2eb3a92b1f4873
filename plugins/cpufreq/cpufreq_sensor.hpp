// The cpufreq sensor: each cpufreq policy (the cores that share a clock: one on a Raspberry Pi 4,
// three on an RK3588, one per core on most x86) with its frequency, the limits its governor works
// within now, the hardware's range and the governor. See README.md.
#pragma once

#include <kiwi/attributes.hpp>
#include <kiwi/sensor.hpp>
#include <string>

namespace kiwi::cpufreq {

inline constexpr kiwi::MetricSpec kFrequency =
    kiwi::gauge("cpufreq_frequency_hertz", kiwi::Unit::hertz, "policy",
                "the policy's current frequency "
                "(<sysfs>/devices/system/cpu/cpufreq/<policy>/scaling_cur_freq)");
inline constexpr kiwi::MetricSpec kMinFrequency =
    kiwi::gauge("cpufreq_min_frequency_hertz", kiwi::Unit::hertz, "policy",
                "the lowest frequency the governor may choose now (scaling_min_freq)");
inline constexpr kiwi::MetricSpec kMaxFrequency = kiwi::gauge(
    "cpufreq_max_frequency_hertz", kiwi::Unit::hertz, "policy",
    "the highest frequency the governor may choose now (scaling_max_freq): below the hardware's "
    "when a thermal limit or a user caps it");
inline constexpr kiwi::MetricSpec kHardwareMin =
    kiwi::gauge("cpufreq_hardware_min_frequency_hertz", kiwi::Unit::hertz, "policy",
                "the lowest frequency the hardware runs at (cpuinfo_min_freq)");
inline constexpr kiwi::MetricSpec kHardwareMax =
    kiwi::gauge("cpufreq_hardware_max_frequency_hertz", kiwi::Unit::hertz, "policy",
                "the highest frequency the hardware runs at (cpuinfo_max_freq)");
inline constexpr kiwi::MetricSpec kCapped = kiwi::gauge(
    "cpufreq_capped", kiwi::Unit::none, "policy",
    "1 when the policy's scaling maximum is below the hardware maximum (capped), else 0");
inline constexpr kiwi::MetricSpec kInfo = kiwi::gauge(
    "cpufreq_policy_info", kiwi::Unit::none, "policy,cpus,governor,driver",
    "always 1: the policy's CPUs (related_cpus, as 0-3), governor (scaling_governor) and driver "
    "(scaling_driver)");

inline constexpr kiwi::MetricSpec kMetrics[] = {
    kFrequency, kMinFrequency, kMaxFrequency, kHardwareMin, kHardwareMax, kCapped, kInfo};

class CpufreqSensor final : public kiwi::Sensor {
 public:
  // Copies the sysfs root; reads nothing. The plugin has no options.
  explicit CpufreqSensor(const kiwi::SensorContext& ctx);

  kiwi::SampleResult sample(kiwi::MetricSink& sink) override;

 private:
  std::string dir_;  // <sysfs>/devices/system/cpu/cpufreq
  kiwi::Logger& log_;
  kiwi::AttributeReads reads_;  // names a file that cannot be read or parsed, logged once
};

}  // namespace kiwi::cpufreq
