#include "exec_sensor.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <kiwi/process.hpp>
#include <stdexcept>

#include "exec_daemon.hpp"
#include "exec_parse.hpp"

namespace kiwi::exec {

namespace {

using namespace std::chrono_literals;

bool valid_env_name(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  });
}

std::string env_name(const std::string& entry) {
  return entry.substr(0, entry.find('='));
}

// Sets NAME=value in `env`, replacing an earlier NAME.
void put(std::vector<std::string>& env, const std::string& entry) {
  const std::string name = env_name(entry) + "=";
  const auto it = std::find_if(env.begin(), env.end(),
                               [&](const std::string& e) { return e.starts_with(name); });
  if (it != env.end())
    *it = entry;
  else
    env.push_back(entry);
}

}  // namespace

std::chrono::nanoseconds kill_margin(std::chrono::nanoseconds time_left) {
  return std::min<std::chrono::nanoseconds>(50ms, time_left / 10);
}

std::chrono::nanoseconds shown_timeout(std::chrono::nanoseconds time_left) {
  if (time_left < 100ms) return std::chrono::ceil<std::chrono::milliseconds>(time_left);
  // Up, since the call starts a little after the tick the timeout is counted from.
  return std::chrono::ceil<std::chrono::duration<long long, std::centi>>(time_left);
}

ExecSensor::ExecSensor(const kiwi::SensorContext& ctx)
    : argv_(ctx.options.get_strings("command")),
      max_output_(static_cast<std::size_t>(ctx.options.get_size("max_output"))),
      log_(ctx.log) {
  if (argv_.empty())
    throw std::invalid_argument(
        "option 'command' is required: the program and its arguments, e.g. command = "
        "[\"/usr/local/bin/probe\", \"--fast\"]");
  if (!argv_[0].starts_with('/'))
    throw std::invalid_argument(
        "option 'command': the program must be an absolute path (there "
        "is no PATH search and no shell), not \"" +
        argv_[0] + "\"");

  const std::string& format = ctx.options.get_string("format");
  if (format == "prometheus")
    format_ = Format::prometheus;
  else if (format == "json")
    format_ = Format::json;
  else
    throw std::invalid_argument("option 'format': \"" + format +
                                "\" is not one of \"prometheus\", \"json\"");

  env_ = kiwi::process::safe_environment();
  std::vector<std::string> given;
  for (const auto& entry : ctx.options.get_strings("env")) {
    const auto eq = entry.find('=');
    if (eq == std::string::npos || !valid_env_name(entry.substr(0, eq)))
      throw std::invalid_argument("option 'env': \"" + entry +
                                  "\" is not NAME=value (NAME letters, digits and _)");
    const std::string name = entry.substr(0, eq);
    if (name.starts_with("KIWI_"))
      throw std::invalid_argument("option 'env': " + name +
                                  " is set by the agent (KIWI_PROCFS, KIWI_SYSFS, KIWI_SENSOR)");
    if (std::find(given.begin(), given.end(), name) != given.end())
      throw std::invalid_argument("option 'env': " + name + " is given twice");
    given.push_back(name);
    put(env_, entry);
  }
  put(env_, "KIWI_PROCFS=" + std::string(ctx.procfs));
  put(env_, "KIWI_SYSFS=" + std::string(ctx.sysfs));
  put(env_, "KIWI_SENSOR=" + std::string(ctx.instance_name));

  if (ctx.options.get_string("mode") == "daemon") {
    kiwi::process::Spec spec;
    spec.argv = argv_;
    spec.env = env_;
    spec.max_output = max_output_;
    daemon_ =
        std::make_unique<Daemon>(std::move(spec), log_, ctx.options.get_duration("restart_delay"));
  }

  if (::access(argv_[0].c_str(), X_OK) != 0)
    log_.warn("cannot execute " + argv_[0] + " (yet): " + std::strerror(errno) +
              "; each sample fails until it can");
}

ExecSensor::~ExecSensor() = default;

kiwi::SampleResult ExecSensor::sample(kiwi::MetricSink& sink) {
  using Clock = std::chrono::steady_clock;
  const auto now = Clock::now();
  const auto deadline = sink.deadline();
  kiwi::process::Spec spec;
  spec.argv = argv_;
  spec.env = env_;
  spec.max_output = max_output_;
  std::chrono::nanoseconds timeout{0};
  if (deadline != Clock::time_point::max()) {
    // A call that starts late (a loaded machine) may find its deadline passed already.
    const auto left =
        std::max<std::chrono::nanoseconds>(deadline - now, std::chrono::nanoseconds(0));
    timeout = shown_timeout(left);
    spec.deadline = deadline - kill_margin(left);
  }
  kiwi::process::Result r;
  if (daemon_) {
    r.output = daemon_->ask(spec.deadline, timeout);  // its stderr goes to the log
  } else {
    r = kiwi::process::run(spec);
    if (r.end != kiwi::process::End::exited || r.exit_status != 0)
      throw std::runtime_error(kiwi::process::describe(r, timeout));
  }

  const Parsed parsed = format_ == Format::json ? parse_json(r.output) : parse_prometheus(r.output);
  if (parsed.error) {
    std::string what = parsed.error->str();
    if (!r.stderr_tail.empty()) what += "; stderr: " + r.stderr_tail;
    throw std::runtime_error(what);
  }
  if (parsed.metrics.empty()) return kiwi::SampleResult::no_data("the program printed no metrics");
  for (const auto& [family, text] : parsed.help) sink.help(family, text);
  std::vector<kiwi::Label> labels;
  for (const auto& m : parsed.metrics) {
    labels.clear();
    for (const auto& [name, value] : m.labels) labels.push_back({name, value});
    // The parsers give only units of kiwi::kUnits.
    const kiwi::MetricSpec spec{
        m.name, kiwi::unit_from_string(m.unit).value_or(kiwi::Unit::none), m.kind, {}, {}};
    sink.emit(spec, labels, m.value);
  }
  return kiwi::SampleResult::ok();
}

}  // namespace kiwi::exec
