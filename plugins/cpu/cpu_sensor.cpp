#include "cpu_sensor.hpp"

#include <unistd.h>

#include <kiwi/io.hpp>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace kiwi::cpu {

CpuSensor::CpuSensor(const kiwi::SensorContext& ctx)
    : procfs_(ctx.procfs),
      sysfs_(ctx.sysfs),
      stat_(kiwi::join_path(procfs_, "stat"), kiwi::kTableReadCap),
      loadavg_(kiwi::join_path(procfs_, "loadavg")),
      per_core_(ctx.options.get_bool("per_core")),
      user_hz_(static_cast<double>(::sysconf(_SC_CLK_TCK) > 0 ? ::sysconf(_SC_CLK_TCK) : 100)),
      log_(ctx.log) {}

kiwi::SampleResult CpuSensor::sample(kiwi::MetricSink& sink) {
  const std::string& stat_path = stat_.path();
  const std::string text = stat_.read_required();
  ProcStat now = kiwi::parse_file(stat_path, [&] { return parse_proc_stat(text); });
  if (!now.all) throw std::runtime_error(stat_path + ": no aggregate 'cpu' line");

  for (std::size_t i = 0; i < kModeNames.size(); ++i)
    sink.emit(kSeconds, {kModeNames[i]}, static_cast<double>(now.all->ticks[i]) / user_hz_);
  if (per_core_)
    for (const auto& [core, times] : now.cores) {
      const std::string label = std::to_string(core);
      for (std::size_t i = 0; i < kModeNames.size(); ++i)
        sink.emit(kCoreSeconds, {label, kModeNames[i]},
                  static_cast<double>(times.ticks[i]) / user_hz_);
    }

  std::vector<std::string> notes;
  if (!previous_) {
    notes.push_back("first sample: usage ratios need two readings");
  } else {
    std::vector<std::string> skipped;
    if (auto r = compute_ratios(*previous_->all, *now.all)) {
      sink.emit(kUsage, r->usage);
      for (std::size_t i = 0; i < kModeNames.size(); ++i)
        sink.emit(kModeShare, {kModeNames[i]}, r->modes[i]);
    } else {
      skipped.push_back("cpu");
    }
    if (per_core_) {
      for (const auto& [core, times] : now.cores) {
        auto before = previous_->cores.find(core);
        if (before == previous_->cores.end()) continue;  // just came online: this is its baseline
        const std::string label = std::to_string(core);
        if (auto r = compute_ratios(before->second, times))
          sink.emit(kCoreUsage, {label}, r->usage);
        else
          skipped.push_back("cpu" + label);
      }
    }
    if (!skipped.empty()) {
      notes.push_back(
          "counters went backwards or did not advance (suspend/resume?), no ratio for " +
          kiwi::join(skipped, ", "));
      // At info when it starts; at debug while it goes on sample after sample (a frozen
      // /proc/stat, a VM whose steal stops the clock), not a line every sample.
      if (notes.back() == last_skipped_note_)
        log_.debug(notes.back());
      else
        log_.info(notes.back());
    }
    last_skipped_note_ = skipped.empty() ? std::string() : notes.back();
  }
  previous_ = std::move(now);

  if (per_core_) {
    std::erase_if(frequency_, [&](const auto& f) { return !previous_->cores.count(f.first); });
    for (const auto& [core, times] : previous_->cores) {
      const std::string label = std::to_string(core);
      auto file = frequency_.find(core);
      if (file == frequency_.end())
        file = frequency_
                   .emplace(core, kiwi::join_path(sysfs_, "devices/system/cpu/cpu" + label +
                                                              "/cpufreq/scaling_cur_freq"))
                   .first;
      try {
        // Absent on VMs and boards without cpufreq: not worth a note.
        if (auto khz = file->second.read())
          if (auto hertz = parse_khz_as_hertz(*khz)) sink.emit(kFrequency, {label}, *hertz);
      } catch (const std::system_error& e) {
        notes.push_back(std::string("skipped frequency: ") + e.what());
      }
    }
  }

  const std::string& load_path = loadavg_.path();
  try {
    const auto load_text = loadavg_.read();
    if (auto load = load_text ? parse_loadavg(*load_text) : std::nullopt) {
      sink.emit(kLoad1, load->load1);
      sink.emit(kLoad5, load->load5);
      sink.emit(kLoad15, load->load15);
    } else {
      notes.push_back(load_path + (load_text ? ": not three numbers: " +
                                                   kiwi::quote_excerpt(kiwi::trim(*load_text))
                                             : ": not found"));
    }
  } catch (const std::system_error& e) {
    notes.push_back(e.what());  // not a regular file, over the read cap, EIO: the rest is read
  }
  return kiwi::SampleResult::ok(kiwi::join(notes));
}

}  // namespace kiwi::cpu
