// The pure part of the clock sensor: what adjtimex(2) returned, to the values the sensor reports.
// No system call here, so each case is tested with a hand-built struct timex.
#pragma once

#include <sys/timex.h>

namespace kiwi::clock {

// The kernel's own view of its clock (kernel/time/ntp.c), in base units.
struct ClockReading {
  // The kernel considers the clock synchronised: adjtimex returned a clock state other than
  // TIME_ERROR (which it returns while STA_UNSYNC is set, and on a PPS signal's errors), and
  // STA_UNSYNC is clear. Whoever disciplines the clock (systemd-timesyncd, chrony, ntpd) clears
  // STA_UNSYNC; the kernel sets it again once the maximum error reaches 16 s.
  bool synchronized = false;
  // maxerror: how far off the clock may be, seconds. The time daemon sets it at each update; the
  // kernel adds 500 µs each second after, up to 16 s (NTP_PHASE_LIMIT, where it gives up).
  double max_error_seconds = 0;
  // esterror: the time daemon's estimate of the error, seconds (timesyncd sets 0; chrony its
  // own estimate); the kernel leaves it as set, 16 s until something sets it.
  double estimated_error_seconds = 0;
};

// adjtimex_return is adjtimex's return value (a clock state, TIME_OK to TIME_ERROR), `tx` what it
// filled in. maxerror and esterror are microseconds whatever STA_NANO says (it is the offset's
// unit); a negative one (a kernel before 6.11 took what root set unchecked; later ones clamp it
// to 0..16 s) is read as 0.
ClockReading from_timex(int adjtimex_return, const struct timex& tx);

}  // namespace kiwi::clock
