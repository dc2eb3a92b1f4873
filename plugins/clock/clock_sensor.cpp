#include "clock_sensor.hpp"

#include <cerrno>
#include <string>
#include <system_error>

#include "clock_timex.hpp"

namespace kiwi::clock {

int kernel_timex(struct timex& tx) {
  tx = {};  // modes 0: read only
  const int state = ::adjtimex(&tx);
  return state < 0 ? -errno : state;
}

ClockSensor::ClockSensor(const kiwi::SensorContext& ctx) : ClockSensor(ctx, kernel_timex) {}

ClockSensor::ClockSensor(const kiwi::SensorContext&, ReadTimex read) : read_(read) {}

kiwi::SampleResult ClockSensor::sample(kiwi::MetricSink& sink) {
  struct timex tx = {};
  const int state = read_(tx);
  // A seccomp filter refuses the call (systemd's ProtectClock=yes, a SystemCallFilter= without
  // it, a container's profile): there is nothing to read here, which is no failure of the board.
  if (state == -EPERM || state == -ENOSYS)
    return kiwi::SampleResult::no_data(
        "adjtimex(2) is refused (" + std::string(state == -EPERM ? "EPERM" : "ENOSYS") +
        "): a sandbox blocks it (systemd's ProtectClock=yes, or a SystemCallFilter= without "
        "clock_adjtime and adjtimex; a container's seccomp profile)");
  if (state < 0) throw std::system_error(-state, std::generic_category(), "adjtimex(2)");
  const ClockReading r = from_timex(state, tx);
  sink.emit(kSynchronized, r.synchronized ? 1.0 : 0.0);
  sink.emit(kMaxError, r.max_error_seconds);
  sink.emit(kEstimatedError, r.estimated_error_seconds);
  return kiwi::SampleResult::ok();
}

}  // namespace kiwi::clock
