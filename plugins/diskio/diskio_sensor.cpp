#include "diskio_sensor.hpp"

#include <algorithm>
#include <filesystem>
#include <kiwi/io.hpp>
#include <stdexcept>

namespace kiwi::diskio {
namespace {

bool exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

}  // namespace

DiskioSensor::DiskioSensor(const kiwi::SensorContext& ctx)
    : procfs_(ctx.procfs),
      sysfs_(ctx.sysfs),
      diskstats_(kiwi::join_path(procfs_, "diskstats"), kiwi::kTableReadCap),
      filter_(ctx.options.get_strings("include"), ctx.options.get_strings("exclude")),
      partitions_(ctx.options.get_bool("partitions")) {}

kiwi::SampleResult DiskioSensor::sample(kiwi::MetricSink& sink) {
  const std::string& stats_path = diskstats_.path();
  const std::string stats_text = diskstats_.read_required();
  const auto all = kiwi::parse_file(stats_path, [&] { return parse_diskstats(stats_text); });

  const bool same =
      all.size() == names_.size() &&
      std::equal(all.begin(), all.end(), names_.begin(),
                 [](const auto& disk, const auto& name) { return disk.name == name; });
  if (!same) {
    // <sysfs>/block lists whole devices only (disks, loop, md, dm-N), never partitions. Without
    // it (sysfs not mounted in a container) a partition cannot be told from a disk: report all.
    const std::string block_dir = kiwi::join_path(sysfs_, "block");
    const bool know_disks = partitions_ || exists(block_dir);
    note_ = know_disks
                ? ""
                : block_dir + " not found: partitions cannot be told from disks, all reported";
    names_.clear();
    reported_.clear();
    for (const auto& disk : all) {
      names_.push_back(disk.name);
      reported_.push_back(filter_.passes(disk.name) &&
                          (partitions_ || !know_disks ||
                           exists(kiwi::join_path(block_dir, sysfs_block_name(disk.name)))));
    }
  }

  bool any = false;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (!reported_[i]) continue;
    const auto& disk = all[i];
    any = true;
    for (const auto& c : kCounterColumns)
      sink.emit(c.counter, {disk.name},
                static_cast<double>(disk.counters[c.column]) * c.multiplier / c.divisor);
  }
  if (!any)
    return kiwi::SampleResult::no_data(
        "no block devices left after include, exclude and partitions");
  return kiwi::SampleResult::ok(note_);
}

}  // namespace kiwi::diskio
