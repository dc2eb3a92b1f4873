// clock plugin: adjtimex(2)'s answer to clock_synchronized and the two errors, for every clock
// state and status the kernel gives (hand-built, since a system call is no fixture file), and the
// sensor once for real on this machine.
#include <sys/timex.h>

#include <catch2/catch.hpp>
#include <cerrno>

#include "clock_sensor.hpp"
#include "clock_timex.hpp"
#include "sensor_test_util.hpp"

using Catch::Matchers::Contains;
using kiwi_sensor_test::Harness;
using namespace kiwi::clock;

namespace {

struct timex timex_of(int status, long maxerror_us, long esterror_us) {
  struct timex tx = {};
  tx.status = status;
  tx.maxerror = maxerror_us;
  tx.esterror = esterror_us;
  return tx;
}

}  // namespace

TEST_CASE("clock: a clock a time daemon keeps is synchronised, its errors in seconds") {
  // systemd-timesyncd after an update 20 s ago: STA_PLL, maxerror grown from 0 by 500 µs a
  // second, esterror as it set it (0).
  const ClockReading r = from_timex(TIME_OK, timex_of(STA_PLL, 10'000, 0));
  CHECK(r.synchronized);
  CHECK(r.max_error_seconds == 0.01);
  CHECK(r.estimated_error_seconds == 0);
  // chrony: its own estimates, in microseconds.
  const ClockReading c = from_timex(TIME_OK, timex_of(0, 1'234'567, 89));
  CHECK(c.synchronized);
  CHECK(c.max_error_seconds == 1.234567);
  CHECK(c.estimated_error_seconds == 0.000089);
}

TEST_CASE("clock: every clock state but TIME_ERROR is synchronised, a leap second's too") {
  for (const int state : {TIME_OK, TIME_INS, TIME_DEL, TIME_OOP, TIME_WAIT}) {
    INFO("state " << state);
    CHECK(from_timex(state, timex_of(STA_PLL, 500, 500)).synchronized);
    CHECK_FALSE(from_timex(state, timex_of(STA_PLL | STA_UNSYNC, 500, 500)).synchronized);
  }
  CHECK(TIME_ERROR == 5);  // the value node_exporter compares with
  CHECK_FALSE(from_timex(TIME_ERROR, timex_of(STA_PLL, 500, 500)).synchronized);
  CHECK_FALSE(from_timex(TIME_ERROR, timex_of(STA_UNSYNC, 500, 500)).synchronized);
}

TEST_CASE("clock: a board that booted without network: STA_UNSYNC, TIME_ERROR, 16 s of error") {
  // What the kernel says until a time daemon sets the clock (ntp_clear: both errors at
  // NTP_PHASE_LIMIT), and again once maxerror has grown to 16 s without an update.
  const ClockReading r = from_timex(TIME_ERROR, timex_of(STA_UNSYNC, 16'000'000, 16'000'000));
  CHECK_FALSE(r.synchronized);
  CHECK(r.max_error_seconds == 16);
  CHECK(r.estimated_error_seconds == 16);
}

TEST_CASE("clock: TIME_ERROR without STA_UNSYNC (a PPS signal lost) is not synchronised") {
  // The kernel's is_error_status(): PPS time discipline asked for, no PPS signal.
  const ClockReading r = from_timex(TIME_ERROR, timex_of(STA_PLL | STA_PPSTIME, 2'000, 1'000));
  CHECK_FALSE(r.synchronized);
  CHECK(r.max_error_seconds == 0.002);
}

TEST_CASE("clock: the errors are microseconds with STA_NANO too, and never negative") {
  // STA_NANO is the unit of `offset` (and jitter), not of maxerror and esterror.
  const ClockReading nano = from_timex(TIME_OK, timex_of(STA_PLL | STA_NANO, 2'500, 40));
  CHECK(nano.max_error_seconds == 0.0025);
  CHECK(nano.estimated_error_seconds == 0.00004);
  // A kernel before 6.11 took a negative value from root unchecked.
  const ClockReading negative = from_timex(TIME_OK, timex_of(STA_PLL, -1, -16'000'000));
  CHECK(negative.max_error_seconds == 0);
  CHECK(negative.estimated_error_seconds == 0);
}

TEST_CASE("clock: the sensor on this machine: a reading in range that agrees with adjtimex") {
  // Whatever this machine's clock is doing: the sample is the kernel's, through the agent's call
  // (units and kinds checked), and agrees with adjtimex asked before and after it.
  auto synchronized_now = [] {
    struct timex tx = {};
    const int state = ::adjtimex(&tx);
    REQUIRE(state >= 0);  // a sandbox refusing it would leave this test nothing to check
    return state != TIME_ERROR;
  };
  Harness h("/nonexistent");  // the clock is the kernel's, not a procfs tree's
  ClockSensor sensor(h.context());
  for (int attempt = 0; attempt < 3; ++attempt) {
    h.sink.clear();
    const bool before = synchronized_now();
    const auto r = h.sample(sensor);
    const bool after = synchronized_now();
    REQUIRE(r.status == kiwi::SampleStatus::ok);
    CHECK(r.message.empty());
    REQUIRE(h.sink.samples.size() == 3);
    const double synced = *h.sink.value("clock_synchronized");
    const double max_error = *h.sink.value("clock_max_error_seconds");
    const double estimated = *h.sink.value("clock_estimated_error_seconds");
    CHECK((synced == 0 || synced == 1));
    CHECK(max_error >= 0);
    CHECK(max_error <= 16);  // the kernel's NTP_PHASE_LIMIT
    CHECK(estimated >= 0);
    CHECK(h.sink.find("clock_max_error_seconds")->unit == "seconds");
    if (before != after) continue;  // a time daemon changed it meanwhile: ask again
    CHECK(synced == (before ? 1 : 0));
    return;
  }
  FAIL("the clock's state changed around each of 3 samples");
}

TEST_CASE("clock: adjtimex refused by a sandbox is no data saying why, another failure an error") {
  Harness h("/nonexistent");
  ClockSensor refused(h.context(), [](struct timex&) { return -EPERM; });
  const auto r = h.sample(refused);
  CHECK(r.status == kiwi::SampleStatus::no_data);
  CHECK_THAT(r.message, Contains("adjtimex(2) is refused (EPERM)") && Contains("ProtectClock=yes"));
  CHECK(h.sink.samples.empty());
  ClockSensor unknown(h.context(), [](struct timex&) { return -ENOSYS; });
  CHECK(h.sample(unknown).status == kiwi::SampleStatus::no_data);
  ClockSensor broken(h.context(), [](struct timex&) { return -EINVAL; });
  CHECK_THROWS_WITH(h.sample(broken), Contains("adjtimex(2): Invalid argument"));
}

TEST_CASE("clock: the sensor emits what from_timex read, as the agent takes it") {
  Harness h("/nonexistent");
  ClockSensor sensor(h.context(), [](struct timex& tx) {
    tx = timex_of(STA_UNSYNC, 16'000'000, 16'000'000);
    return TIME_ERROR;
  });
  CHECK(h.sample(sensor).status == kiwi::SampleStatus::ok);
  CHECK(h.sink.value("clock_synchronized") == 0);
  CHECK(h.sink.value("clock_max_error_seconds") == 16);
  CHECK(h.sink.value("clock_estimated_error_seconds") == 16);
  CHECK(h.sink.find("clock_synchronized")->unit.empty());
}
