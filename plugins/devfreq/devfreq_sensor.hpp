// The devfreq sensor: every devfreq device's frequency, its limits and, where the kernel has the
// attribute, its load: the GPU and NPU of an RK3588, a memory controller. See README.md.
#pragma once

#include <kiwi/attributes.hpp>
#include <kiwi/sensor.hpp>
#include <string>
#include <vector>

namespace kiwi::devfreq {

inline constexpr kiwi::MetricSpec kFrequency =
    kiwi::gauge("devfreq_frequency_hertz", kiwi::Unit::hertz, "device",
                "the device's current frequency (<sysfs>/class/devfreq/<device>/cur_freq)");
inline constexpr kiwi::MetricSpec kMinFrequency =
    kiwi::gauge("devfreq_min_frequency_hertz", kiwi::Unit::hertz, "device",
                "the lowest frequency its governor may choose now (min_freq)");
inline constexpr kiwi::MetricSpec kMaxFrequency =
    kiwi::gauge("devfreq_max_frequency_hertz", kiwi::Unit::hertz, "device",
                "the highest frequency its governor may choose now (max_freq): below the "
                "hardware's when capped, thermally or by a user");
inline constexpr kiwi::MetricSpec kLoad = kiwi::gauge(
    "devfreq_load_ratio", kiwi::Unit::ratio, "device",
    "share of the last polling interval the device was busy (load, as Rockchip's and Android's "
    "kernels have it: 23@300000000Hz)");

inline constexpr kiwi::MetricSpec kMetrics[] = {kFrequency, kMinFrequency, kMaxFrequency, kLoad};

class DevfreqSensor final : public kiwi::Sensor {
 public:
  // Copies the sysfs root; reads nothing. The plugin has no options.
  explicit DevfreqSensor(const kiwi::SensorContext& ctx);

  kiwi::SampleResult sample(kiwi::MetricSink& sink) override;

 private:
  std::string dir_;  // <sysfs>/class/devfreq
  kiwi::Logger& log_;
  kiwi::AttributeReads reads_;  // names a file that cannot be read or parsed, logged once
};

}  // namespace kiwi::devfreq
