#include "cpufreq_sensor.hpp"

#include <algorithm>
#include <filesystem>
#include <kiwi/io.hpp>
#include <kiwi/text.hpp>
#include <stdexcept>
#include <system_error>
#include <utility>
#include <vector>

#include "cpufreq_parse.hpp"

namespace kiwi::cpufreq {
namespace {

// The policyN directories, in number order (policy10 after policy4).
std::vector<std::pair<unsigned, std::string>> list_policies(const std::string& dir) {
  std::vector<std::pair<unsigned, std::string>> found;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (!name.starts_with("policy")) continue;  // cpufreq/boost, cpufreq/ondemand/ (tunables)
    if (const auto n = kiwi::to_number<unsigned>(std::string_view(name).substr(6)))
      found.emplace_back(*n, std::move(name));
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

CpufreqSensor::CpufreqSensor(const kiwi::SensorContext& ctx)
    : dir_(kiwi::join_path(ctx.sysfs, "devices/system/cpu/cpufreq")), log_(ctx.log) {}

kiwi::SampleResult CpufreqSensor::sample(kiwi::MetricSink& sink) {
  // Listed each sample: a handful of directories, and a policy appears when its first CPU comes
  // online after boot.
  const auto policies = list_policies(dir_);
  if (policies.empty())
    return kiwi::SampleResult::no_data("no cpufreq policies: " + dir_ +
                                       " is missing or empty (a VM, or a kernel without cpufreq)");
  std::vector<std::string> offline;
  bool any = false;
  for (const auto& [number, policy] : policies) {
    const std::string base = kiwi::join_path(dir_, policy);
    // A policy whose CPUs are all offline keeps its directory, and the kernel answers every read
    // in it with EBUSY: not a failure, nothing to report.
    std::optional<std::string> cpus;
    const std::string cpus_path = kiwi::join_path(base, "related_cpus");
    try {
      if (const auto text = kiwi::read_file(cpus_path)) {
        cpus = parse_cpu_list(*text);
        if (!cpus) reads_.note(cpus_path + ": not a CPU list: " + kiwi::quote_excerpt(*text, 40));
      }
    } catch (const std::system_error& e) {
      if (e.code() == std::errc::device_or_resource_busy) {
        offline.push_back(policy);
        continue;
      }
      reads_.note(e.what());
    }
    const auto read_hertz = [&](const char* file) {
      return reads_.read(kiwi::join_path(base, file), parse_khz);
    };
    if (const auto hz = read_hertz("scaling_cur_freq")) {
      sink.emit(kFrequency, {policy}, *hz);
      any = true;
    }
    if (const auto hz = read_hertz("scaling_min_freq")) sink.emit(kMinFrequency, {policy}, *hz);
    const auto max = read_hertz("scaling_max_freq");
    if (max) sink.emit(kMaxFrequency, {policy}, *max);
    if (const auto hz = read_hertz("cpuinfo_min_freq")) sink.emit(kHardwareMin, {policy}, *hz);
    const auto hardware_max = read_hertz("cpuinfo_max_freq");
    if (hardware_max) sink.emit(kHardwareMax, {policy}, *hardware_max);
    if (max && hardware_max) sink.emit(kCapped, {policy}, *max < *hardware_max ? 1.0 : 0.0);
    if (const auto governor = reads_.read(kiwi::join_path(base, "scaling_governor"), parse_word)) {
      const auto driver = reads_.read(kiwi::join_path(base, "scaling_driver"), parse_word);
      sink.emit(kInfo,
                {policy, cpus.value_or(std::to_string(number)), *governor, driver.value_or("")},
                1.0);
    }
  }
  std::string note = reads_.finish(log_);
  if (!any && offline.size() < policies.size())
    throw std::runtime_error(note.empty() ? "no cpufreq policy has a frequency" : note);
  if (!offline.empty())
    note += (note.empty() ? "" : "; ") + ("every CPU offline in " + kiwi::join(offline, ", "));
  return kiwi::SampleResult::ok(note);
}

}  // namespace kiwi::cpufreq
