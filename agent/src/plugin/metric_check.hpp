// The one place where what a sensor emits is checked, before it reaches the snapshot, the history
// or /metrics (the rules are in kiwi/sensor.hpp, MetricSink). A plugin cannot break a Prometheus
// scrape or the JSON API: a metric that fails a rule is dropped, counted and named; label values
// and the sensor's message are made valid UTF-8 (each invalid byte becomes U+FFFD,
// kiwi::to_valid_utf8), and the message is cut at 16 KiB.
#pragma once

#include <chrono>
#include <functional>
#include <kiwi/io.hpp>
#include <kiwi/model.hpp>
#include <kiwi/sensor.hpp>
#include <optional>
#include <string>
#include <vector>

#include "plugin/rates.hpp"

namespace kiwi::agent {

// Why a metric is refused; nullopt when it passes. Names follow kiwi/prometheus.hpp's rules for
// sensors (Prometheus' without the colon; label names not starting with "__"). Does not check
// duplicates (CheckedSink does, across one sample).
std::optional<std::string> check_metric(const MetricSpec& metric, std::span<const Label> labels,
                                        double value);

// Collects one sensor's sample into `out`, keeping what passes check_metric(). finish() then drops
// repeats of a series (same name and labels; the first is kept) and returns the status note that
// names what was dropped ("" when nothing was). `deadline` is what deadline() returns: the instant
// the collector times the sample() call out at.
class CheckedSink final : public MetricSink {
 public:
  // `rates`, when given, derives the rate gauges of the counters that name one (rates.hpp).
  // `help`, when given, collects the HELP texts the sensor gives (MetricSink::help).
  explicit CheckedSink(
      std::vector<MetricValue>& out,
      std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max(),
      RateDeriver* rates = nullptr,
      std::vector<std::pair<std::string, std::string>>* help = nullptr)
      : out_(out), deadline_(deadline), rates_(rates), help_(help) {}
  using MetricSink::emit;
  void emit(const MetricSpec& metric, std::span<const Label> labels, double value) override;
  std::chrono::steady_clock::time_point deadline() const override { return deadline_; }
  // Kept when the family is a valid metric name not given before in this sample, the text made
  // valid UTF-8 and cut at 1 KiB; anything else is ignored (it only words /metrics' HELP).
  void help(std::string_view family, std::string_view text) override;
  std::string finish();
  std::uint64_t dropped() const { return dropped_; }

 private:
  void note(std::string problem);
  std::vector<MetricValue>& out_;
  std::chrono::steady_clock::time_point deadline_;
  RateDeriver* rates_;
  std::vector<std::pair<std::string, std::string>>* help_;
  std::uint64_t dropped_ = 0;
  std::vector<std::string> problems_;  // the first few, for the status message
};

// What one checked sample() call gave: the sensor's readings after CheckedSink, with the rates
// of its counters derived (rates.hpp).
struct SampleCall {
  SensorState state = SensorState::ok;
  std::string message;               // the sensor's, then why some rates are missing ("; " between)
  std::vector<MetricValue> metrics;  // none after an error: a half-finished reading is not one
  std::vector<std::pair<std::string, std::string>> help;  // family, HELP text (MetricSink::help)
  std::uint64_t dropped = 0;                              // metrics the host refused
  std::string dropped_note;                               // what was dropped ("" when nothing)
  std::string rates_log;           // a counter reset, for a log line ("" when none)
  bool rates_log_repeats = false;  // the same as the last sample's: at debug, not info
};

// Calls sensor.sample() as the collector does: reads the clock for the rates (`uptime`, the
// <procfs>/uptime the caller keeps, when `rates` wants it), checks every metric, derives the
// rates, and turns an exception into state error with its what().
SampleCall call_sensor(
    Sensor& sensor, RateDeriver& rates, KeptFile& uptime,
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());
// The same with <procfs>/uptime opened for this call.
SampleCall call_sensor(Sensor& sensor, RateDeriver& rates, std::string_view procfs);
// What call_sensor does once the clock is read, for any code that emits as a sensor does (the
// agent's own report, collect/self_report.hpp): calls `sample`, checks every metric, derives the
// rates when `rates` is given, turns an exception into state error.
SampleCall call_checked(
    const std::function<SampleResult(MetricSink&)>& sample, RateDeriver* rates,
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());

}  // namespace kiwi::agent
