// The host's rate derivation (agent/src/plugin/rates.hpp): the one place where a counter's
// per-second rate is made, with resets, the clock and the first sample handled once for every
// sensor.
#include <catch2/catch.hpp>
#include <kiwi/rates.hpp>

#include "plugin/metric_check.hpp"
#include "plugin/rates.hpp"

using kiwi::agent::CheckedSink;
using kiwi::agent::RateDeriver;

namespace {

constexpr kiwi::MetricSpec kBytes =
    kiwi::counter("t_bytes_total", kiwi::Unit::bytes, "dev", "", "t_bytes_per_second");
constexpr kiwi::MetricSpec kOps =
    kiwi::counter("t_ops_total", kiwi::Unit::count, "dev", "", "t_ops_per_second");
constexpr kiwi::MetricSpec kBusy =
    kiwi::counter("t_busy_seconds_total", kiwi::Unit::seconds, "dev", "", "t_busy_ratio");
constexpr kiwi::MetricSpec kPlain = kiwi::counter("t_plain_total", kiwi::Unit::count, "", "");

struct Sample {
  std::vector<kiwi::MetricValue> metrics;
  RateDeriver::Notes notes;
  const kiwi::MetricValue* find(std::string_view name, std::string_view dev) const {
    for (const auto& m : metrics)
      if (m.name == name && !m.labels.empty() && m.labels[0].second == dev) return &m;
    return nullptr;
  }
};

// One sample at `now_ms` (nullopt: no clock): `emit` gets the sink; the notes are the deriver's.
template <class Fn>
Sample sample(RateDeriver& rates, std::optional<std::int64_t> now_ms, Fn&& emit) {
  Sample s;
  rates.begin(now_ms, now_ms ? "" : "uptime: not found");
  CheckedSink sink(s.metrics, std::chrono::steady_clock::time_point::max(), &rates);
  emit(sink);
  s.notes = rates.finish(true, s.metrics);
  return s;
}

}  // namespace

TEST_CASE("rates: the first sample is the baseline, the second has each counter's rate") {
  RateDeriver rates;
  auto first = sample(rates, 1000, [](auto& sink) {
    sink.emit(kBytes, {"a"}, 1000);
    sink.emit(kPlain, 5);
  });
  CHECK(first.metrics.size() == 2);  // the counters only
  CHECK(first.notes.status == "first sample: rates need two readings");
  CHECK(first.notes.log.empty());
  auto second = sample(rates, 1500, [](auto& sink) {
    sink.emit(kBytes, {"a"}, 251000);
    sink.emit(kPlain, 6);  // a counter without a rate gets none
  });
  REQUIRE(second.find("t_bytes_per_second", "a"));
  CHECK(second.find("t_bytes_per_second", "a")->value == 500000.0);  // 250000 bytes in 0.5 s
  CHECK(second.find("t_bytes_per_second", "a")->unit == "bytes_per_second");
  CHECK(second.find("t_bytes_per_second", "a")->kind == kiwi::MetricKind::gauge);
  CHECK(second.metrics.size() == 3);
  CHECK(second.notes.status.empty());
  CHECK(rates.wants_clock());
}

TEST_CASE("rates: seconds become a ratio capped at 1, exactly, and counts a per_second rate") {
  RateDeriver rates;
  sample(rates, 10'000, [](auto& sink) {
    sink.emit(kBusy, {"d"}, 123456.729);
    sink.emit(kOps, {"d"}, 7);
  });
  auto s = sample(rates, 11'000, [](auto& sink) {
    sink.emit(kBusy, {"d"}, 123456.789);  // 60 ms busy: not 0.0600000000006
    sink.emit(kOps, {"d"}, 39);
  });
  CHECK(s.find("t_busy_ratio", "d")->value == 0.06);
  CHECK(s.find("t_busy_ratio", "d")->unit == "ratio");
  CHECK(s.find("t_ops_per_second", "d")->value == 32.0);
  CHECK(s.find("t_ops_per_second", "d")->unit == "per_second");
  auto over = sample(rates, 12'000, [](auto& sink) { sink.emit(kBusy, {"d"}, 123457.799); });
  CHECK(over.find("t_busy_ratio", "d")->value == 1.0);  // 1010 ms in 1000: read apart
}

TEST_CASE(
    "rates: a counter going back takes its device's rates for one interval, logged at info once") {
  RateDeriver rates;
  auto emit = [](double a_bytes, double a_ops, double b_bytes) {
    return [=](auto& sink) {
      sink.emit(kBytes, {"a"}, a_bytes);
      sink.emit(kOps, {"a"}, a_ops);
      sink.emit(kBytes, {"b"}, b_bytes);
    };
  };
  sample(rates, 1000, emit(1000, 0, 50));
  auto reset = sample(rates, 2000, emit(10, 0, 150));  // a's bytes went back; its ops stayed 0
  CHECK_FALSE(reset.find("t_bytes_per_second", "a"));
  CHECK_FALSE(reset.find("t_ops_per_second", "a"));  // 0 -> 0 may hide a rise and a reset
  CHECK(reset.find("t_bytes_per_second", "b")->value == 100.0);
  CHECK(reset.notes.status ==
        "counters went backwards (reset or wrapped), no rates this time for dev=a");
  CHECK(reset.notes.log == reset.notes.status);
  CHECK(reset.metrics.size() == 4);  // the three counters and b's rate

  // The new reading is the baseline: the next interval is measured from it.
  auto after = sample(rates, 3000, emit(20, 2, 250));
  CHECK(after.find("t_bytes_per_second", "a")->value == 10.0);
  CHECK(after.find("t_ops_per_second", "a")->value == 2.0);
  CHECK(after.notes.status.empty());

  // Going back in two intervals in a row is logged at info once, then at debug while it keeps
  // happening (not an info line every sample).
  auto again = sample(rates, 4000, emit(5, 2, 350));
  CHECK_FALSE(again.notes.log.empty());
  CHECK_FALSE(again.notes.log_repeats);
  auto still = sample(rates, 5000, emit(1, 2, 450));
  CHECK_FALSE(still.notes.status.empty());
  CHECK(still.notes.log == again.notes.log);
  CHECK(still.notes.log_repeats);
  auto over = sample(rates, 6000, emit(2, 3, 550));  // advancing again: nothing to log
  CHECK(over.notes.log.empty());
  CHECK_FALSE(over.notes.log_repeats);
}

TEST_CASE("rates: a clock that does not advance, or is missing, gives no rates and says why") {
  RateDeriver rates;
  sample(rates, 1000, [](auto& sink) { sink.emit(kBytes, {"a"}, 1); });
  auto stalled = sample(rates, 1000, [](auto& sink) { sink.emit(kBytes, {"a"}, 2); });
  CHECK(stalled.metrics.size() == 1);
  CHECK(stalled.notes.status == "uptime did not advance since the previous sample, no rates");
  auto blind = sample(rates, std::nullopt, [](auto& sink) { sink.emit(kBytes, {"a"}, 3); });
  CHECK(blind.metrics.size() == 1);
  CHECK(blind.notes.status == "no rates: uptime: not found");
  // The baseline from before the gap is still there: measured over the whole 2 s.
  auto back = sample(rates, 3000, [](auto& sink) { sink.emit(kBytes, {"a"}, 5); });
  CHECK(back.find("t_bytes_per_second", "a")->value == 1.5);
}

TEST_CASE("rates: a series not emitted is forgotten, and a sensor without counters is not timed") {
  RateDeriver rates;
  sample(rates, 1000, [](auto& sink) { sink.emit(kBytes, {"usb0"}, 100); });
  sample(rates, 2000, [](auto&) {});  // usb0 unplugged
  auto replugged = sample(rates, 3000, [](auto& sink) { sink.emit(kBytes, {"usb0"}, 10); });
  CHECK_FALSE(replugged.find("t_bytes_per_second", "usb0"));  // a new baseline, not a reset
  CHECK(replugged.notes.status == "first sample: rates need two readings");
  CHECK(replugged.notes.log.empty());

  RateDeriver gauges_only;
  CHECK(gauges_only.wants_clock());  // the first sample finds out
  sample(gauges_only, 1000,
         [](auto& sink) { sink.emit(kiwi::gauge("t_celsius", kiwi::Unit::celsius, "", ""), 40); });
  CHECK_FALSE(gauges_only.wants_clock());  // uptime is not read for it again
}

TEST_CASE("rates: the SDK's counter_rate is the one rule, integers exact") {
  CHECK(kiwi::counter_rate(1000, 251000, 0.5) == 500000.0);
  CHECK(kiwi::counter_rate(9007199254740000.0, 9007199254740991.0, 1) == 991.0);
  CHECK(kiwi::counter_rate(1234.56, 1234.81, 1) == 0.25);
  CHECK_FALSE(kiwi::counter_rate(10, 9, 1));
  CHECK_FALSE(kiwi::counter_rate(1, 2, 0));
}
