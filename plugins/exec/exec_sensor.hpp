// The exec sensor: runs a user's program each sample (kiwi/process.hpp) and reads the metrics it
// prints, in the Prometheus text format or as JSON (exec_parse.hpp). See README.md.
#pragma once

#include <chrono>
#include <kiwi/sensor.hpp>
#include <memory>
#include <string>
#include <vector>

namespace kiwi::exec {

class Daemon;

// The one place the exec options and their defaults are declared.
inline constexpr kiwi::OptionSpec kOptions[] = {
    {"command", kiwi::OptionType::string_list, "[]",
     "the program and its arguments (required; run as is, no shell; the program an absolute path)"},
    {"env", kiwi::OptionType::string_list, "[]",
     "extra NAME=value variables for the program, on top of PATH, LANG, TZ and KIWI_*"},
    {"format", kiwi::OptionType::string, "\"prometheus\"",
     "what the program prints: \"prometheus\" (text format 0.0.4) or \"json\""},
    {"max_output", kiwi::OptionType::size, "\"1MiB\"",
     "most bytes the program may print on stdout (in daemon mode: per answer); more: it is killed "
     "and the sample fails",
     true, 1, 256 << 20},
    {"mode", kiwi::OptionType::string, "\"once\"",
     "\"once\": the program runs for each sample; \"daemon\": it is kept running and asked for "
     "each sample by a newline on its stdin, answering with its metrics and a line \"# EOF\"",
     false, 0, 0, "once,daemon"},
    {"restart_delay", kiwi::OptionType::duration, "\"30s\"",
     "daemon mode: the longest wait before a program that exited is started again (the wait "
     "starts at 1s and doubles each time in a row)",
     true, 1000, 3'600'000},
};

enum class Format { prometheus, json };

// How long before the collector's deadline the program is killed: min(50 ms, 10 % of the time
// the call has), so that the sensor's own error ("timed out after 2s; stderr: ...") is what gets
// reported, not the collector's generic one.
std::chrono::nanoseconds kill_margin(std::chrono::nanoseconds time_left);

// The time a call had, as the TOML says it: rounded up to 10 ms from 100 ms on (the collector
// starts the call a moment after the tick its timeout counts from: a "2s" timeout leaves 1.9996 s).
std::chrono::nanoseconds shown_timeout(std::chrono::nanoseconds time_left);

class ExecSensor final : public kiwi::Sensor {
 public:
  // Checks the options (throws naming the option); does not run the program. A program that is
  // not there yet is a warning, not a refusal: it may be installed after the agent starts.
  explicit ExecSensor(const kiwi::SensorContext& ctx);
  ~ExecSensor() override;  // stops a daemon program

  kiwi::SampleResult sample(kiwi::MetricSink& sink) override;

 private:
  std::vector<std::string> argv_;
  std::vector<std::string> env_;  // the whole environment the program gets
  Format format_;
  std::size_t max_output_;
  kiwi::Logger& log_;
  std::unique_ptr<Daemon> daemon_;  // mode = "daemon"
};

}  // namespace kiwi::exec
