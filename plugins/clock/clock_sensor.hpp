// The clock sensor: whether the kernel considers its clock synchronised, and how far off it may
// be, from adjtimex(2) (node_exporter's timex collector, in part). See README.md.
#pragma once

#include <sys/timex.h>

#include <kiwi/sensor.hpp>

namespace kiwi::clock {

inline constexpr kiwi::MetricSpec kSynchronized = kiwi::gauge(
    "clock_synchronized", kiwi::Unit::none, "",
    "1 when the kernel considers its clock synchronised (adjtimex(2) returns a state other than "
    "TIME_ERROR: a time daemon such as systemd-timesyncd, chrony or ntpd cleared STA_UNSYNC), "
    "else 0");
inline constexpr kiwi::MetricSpec kMaxError = kiwi::gauge(
    "clock_max_error_seconds", kiwi::Unit::seconds, "",
    "how far off the clock may be (adjtimex maxerror): set by the time daemon at each update, "
    "then growing by 0.5 ms a second; 16 when nothing keeps the clock");
inline constexpr kiwi::MetricSpec kEstimatedError =
    kiwi::gauge("clock_estimated_error_seconds", kiwi::Unit::seconds, "",
                "the time daemon's estimate of the clock's error (adjtimex esterror); 16 until "
                "one sets it");

inline constexpr kiwi::MetricSpec kMetrics[] = {kSynchronized, kMaxError, kEstimatedError};

// Reads the kernel's clock state into `tx`: adjtimex's return value (a clock state), or -errno
// when the call fails.
using ReadTimex = int (*)(struct timex& tx);

// The real one: adjtimex(2) with modes 0, a read that needs no privilege.
int kernel_timex(struct timex& tx);

class ClockSensor final : public kiwi::Sensor {
 public:
  // Reads nothing. The plugin has no options; the clock is the running kernel's, whatever the
  // procfs and sysfs roots.
  explicit ClockSensor(const kiwi::SensorContext& ctx);
  // For tests: the same, with adjtimex replaced.
  ClockSensor(const kiwi::SensorContext& ctx, ReadTimex read);

  kiwi::SampleResult sample(kiwi::MetricSink& sink) override;

 private:
  ReadTimex read_;
};

}  // namespace kiwi::clock
