#include "memory_sensor.hpp"

#include <cstdlib>
#include <kiwi/io.hpp>
#include <stdexcept>

#include "memory_parse.hpp"

namespace kiwi::memory {

MemorySensor::MemorySensor(const kiwi::SensorContext& ctx)
    : procfs_(ctx.procfs), meminfo_(kiwi::join_path(procfs_, "meminfo")), log_(ctx.log) {}

kiwi::SampleResult MemorySensor::sample(kiwi::MetricSink& sink) {
  const std::string& path = meminfo_.path();
  const std::string text = meminfo_.read_required();
  const MemoryStats stats = kiwi::parse_file(path, [&] {
    const auto meminfo = parse_meminfo(text);
    std::optional<std::uint64_t> min_free_kbytes;  // only needed to estimate MemAvailable
    if (!meminfo.count("MemAvailable"))
      if (auto v = kiwi::read_file(kiwi::join_path(procfs_, "sys/vm/min_free_kbytes")))
        min_free_kbytes = std::strtoull(v->c_str(), nullptr, 10);
    return compute_memory(meminfo, min_free_kbytes);
  });
  for (const auto& m : kMetrics)
    if (const auto& value = stats.*m.field) sink.emit(m.metric, *value);

  if (!stats.available_estimated) return kiwi::SampleResult::ok();
  const std::string note =
      "MemAvailable missing (kernel older than 3.14?): available estimated as the kernel "
      "computes it, from MemFree, the file page cache and SReclaimable";
  if (!logged_estimate_) log_.info(note);
  logged_estimate_ = true;
  return kiwi::SampleResult::ok(note);
}

}  // namespace kiwi::memory
