// The one place where per-second rates are derived from the counters sensors emit. A counter row
// that names a `rate` (kiwi/plugin.hpp, MetricSpec) gets that gauge next to it in the same sample:
// the change since the sensor's previous sample over the time between the two, in rate_unit()
// of the counter's unit. Resets, wraps and the first sample are handled here, once, by the rule
// of kiwi/rates.hpp (counter_rate): no rate for that interval, the new reading is the baseline;
// and a reset of one counter takes the rates of its whole label set (its device) for that interval.
//
// One RateDeriver per sensor instance, used by that sensor's worker thread only (CheckedSink
// calls it as the counters arrive).
#pragma once

#include <cstdint>
#include <kiwi/model.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiwi::agent {

// Removes the metrics whose flag is set (flagged[i] for metrics[i]), keeping the others' order.
void erase_flagged(std::vector<MetricValue>& metrics, const std::vector<char>& flagged);

class RateDeriver {
 public:
  // Whether the next sample needs the clock: it is read only for sensors that emit counters with
  // a rate (and once, at the first sample, to find out).
  bool wants_clock() const { return wants_clock_; }
  // Starts a sample read at `now_ms` (<procfs>/uptime in milliseconds), or without a clock, for
  // the reason given.
  void begin(std::optional<std::int64_t> now_ms, std::string no_clock_reason = {});
  // `counter` was emitted (checked, kept) under `row`, which names a rate: appends that gauge to
  // `out` when the interval has one. `counter` may be an element of `out`.
  void add(const MetricValue& counter, const MetricSpec& row, std::vector<MetricValue>& out);

  struct Notes {
    std::string status;        // for the sample's message: why rates are missing ("" when none are)
    std::string log;           // what went backwards ("" when nothing did), for the log:
    bool log_repeats = false;  // the same as the last sample's (logged at debug, not info)
  };
  // Ends the sample whose metrics are `out`. A counter that went backwards takes the rates of
  // every counter with its labels (the same device) out of `out` for this interval. After a
  // sample that was read (`complete`), series it did not emit are forgotten; after one that
  // failed, the baselines it did read stay (each is a true reading at its time).
  Notes finish(bool complete, std::vector<MetricValue>& out);

 private:
  struct Reading {
    double value = 0;
    std::int64_t ms = 0;
    std::uint64_t sample = 0;  // the sample that read it
  };
  std::unordered_map<std::string, Reading> last_;  // series key -> its latest reading
  std::optional<std::int64_t> now_ms_;
  std::string no_clock_reason_;
  std::uint64_t sample_ = 0;
  bool wants_clock_ = true;
  bool any_counter_ = false;
  bool first_ = false;                  // some series had no baseline yet
  bool had_baseline_ = false;           // some series had one
  bool stalled_ = false;                // the clock did not advance
  std::vector<std::string> backwards_;  // label sets (or names) that went back this sample
  std::string last_backwards_;          // what backwards_ said last sample
  std::vector<std::size_t> derived_;    // where this sample's rates are in `out`
  std::string key_;                     // reused
};

}  // namespace kiwi::agent
