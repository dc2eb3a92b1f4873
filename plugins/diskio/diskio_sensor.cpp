#include "diskio_sensor.hpp"

#include <algorithm>
#include <filesystem>
#include <kiwi/io.hpp>
#include <kiwi/rates.hpp>
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
  const std::string stats_text = kiwi::read_required_file(stats_path);
  const std::int64_t uptime_ms = kiwi::read_uptime_ms(procfs_);
  const auto all = kiwi::parse_file(stats_path, [&] { return parse_diskstats(stats_text); });

  Reading now{uptime_ms, {}};
  std::vector<std::string> notes;
  const std::optional<double> elapsed = kiwi::rate_interval_seconds(
      previous_ ? std::optional(previous_->uptime_ms) : std::nullopt, now.uptime_ms, notes);

  // <sysfs>/block lists whole devices only (disks, loop, md, dm-N), never partitions. Without it
  // (sysfs not mounted in a container) a partition cannot be told from a disk: report all.
  const std::string block_dir = kiwi::join_path(sysfs_, "block");
  const bool know_disks = partitions_ || exists(block_dir);
  if (!know_disks)
    notes.push_back(block_dir + " not found: partitions cannot be told from disks, all reported");

  std::vector<std::string> backwards;
  for (const auto& disk : all) {
    if (!filter_.passes(disk.name)) continue;
    if (!partitions_ && know_disks &&
        !exists(kiwi::join_path(block_dir, sysfs_block_name(disk.name))))
      continue;
    now.devices.emplace(disk.name, disk.counters);
    if (!elapsed) continue;
    auto before = previous_->devices.find(disk.name);
    if (before == previous_->devices.end()) continue;  // just appeared: this is its baseline
    const auto rates = compute_rates(before->second, disk.counters, *elapsed);
    if (!rates) {
      backwards.push_back(disk.name);  // replugged under the same name: measure from now on
      continue;
    }
    for (std::size_t i = 0; i < rates->size(); ++i)
      sink.emit(kRateColumns[i].metric, {disk.name}, (*rates)[i]);
  }
  if (!backwards.empty()) {
    notes.push_back("counters went backwards (device replaced?), no rates for " +
                    join(backwards, ", "));
    log_.info(notes.back());
  }
  const bool none = now.devices.empty();
  previous_ = std::move(now);
  if (none)
    return kiwi::SampleResult::no_data(
        "no block devices left after include, exclude and partitions");
  return kiwi::SampleResult::ok(join(notes, "; "));
}

}  // namespace kiwi::diskio
