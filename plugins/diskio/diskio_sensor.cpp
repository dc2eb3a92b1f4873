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
      filter_(ctx.options.get_strings("include"), ctx.options.get_strings("exclude")),
      partitions_(ctx.options.get_bool("partitions")),
      log_(ctx.log) {}

kiwi::SampleResult DiskioSensor::sample(kiwi::MetricSink& sink) {
  const std::string stats_path = kiwi::join_path(procfs_, "diskstats");
  const std::string stats_text = kiwi::read_required_file(stats_path, kiwi::kTableReadCap);
  const auto all = kiwi::parse_file(stats_path, [&] { return parse_diskstats(stats_text); });

  // <sysfs>/block lists whole devices only (disks, loop, md, dm-N), never partitions. Without it
  // (sysfs not mounted in a container) a partition cannot be told from a disk: report all.
  std::string note;
  const std::string block_dir = kiwi::join_path(sysfs_, "block");
  const bool know_disks = partitions_ || exists(block_dir);
  if (!know_disks)
    note = block_dir + " not found: partitions cannot be told from disks, all reported";

  bool any = false;
  for (const auto& disk : all) {
    if (!filter_.passes(disk.name)) continue;
    if (!partitions_ && know_disks &&
        !exists(kiwi::join_path(block_dir, sysfs_block_name(disk.name))))
      continue;
    any = true;
    for (const auto& c : kCounterColumns)
      sink.emit(c.counter, {disk.name},
                static_cast<double>(disk.counters[c.column]) * c.multiplier / c.divisor);
  }
  if (!any)
    return kiwi::SampleResult::no_data(
        "no block devices left after include, exclude and partitions");
  return kiwi::SampleResult::ok(note);
}

}  // namespace kiwi::diskio
