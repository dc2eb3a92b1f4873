#include "devfreq_sensor.hpp"

#include <algorithm>
#include <filesystem>
#include <kiwi/io.hpp>

#include "devfreq_parse.hpp"

namespace kiwi::devfreq {

DevfreqSensor::DevfreqSensor(const kiwi::SensorContext& ctx)
    : dir_(kiwi::join_path(ctx.sysfs, "class/devfreq")), log_(ctx.log) {}

kiwi::SampleResult DevfreqSensor::sample(kiwi::MetricSink& sink) {
  // The devices, in name order; a handful at most, listed each sample (a driver loaded later
  // shows up at once, one unloaded goes).
  std::vector<std::string> devices;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec))
    devices.push_back(it->path().filename().string());
  std::sort(devices.begin(), devices.end());
  if (devices.empty())
    return kiwi::SampleResult::no_data("no devfreq devices: " + dir_ +
                                       " is missing or empty (no GPU, NPU or memory controller "
                                       "with frequency scaling, or a kernel without devfreq)");
  bool any = false;
  for (const auto& device : devices) {
    const std::string base = kiwi::join_path(dir_, device);
    for (const auto& [file, spec] :
         {std::pair{"cur_freq", &kFrequency}, std::pair{"min_freq", &kMinFrequency},
          std::pair{"max_freq", &kMaxFrequency}})
      if (const auto hz = reads_.read(kiwi::join_path(base, file), parse_hertz)) {
        sink.emit(*spec, {device}, *hz);
        any = true;
      }
    if (const auto load = reads_.read(kiwi::join_path(base, "load"), parse_load))
      sink.emit(kLoad, {device}, *load);
  }
  const std::string note = reads_.finish(log_);
  if (!any) throw std::runtime_error(note.empty() ? "no devfreq device has a frequency" : note);
  return kiwi::SampleResult::ok(note);
}

}  // namespace kiwi::devfreq
