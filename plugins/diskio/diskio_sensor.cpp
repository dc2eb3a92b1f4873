#include "diskio_sensor.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <kiwi/io.hpp>
#include <stdexcept>

namespace kiwi::diskio {
namespace {

bool exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

std::string hex_byte(std::uint8_t v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", v);
  return buf;
}

}  // namespace

DiskioSensor::DiskioSensor(const kiwi::SensorContext& ctx)
    : procfs_(ctx.procfs),
      sysfs_(ctx.sysfs),
      diskstats_(kiwi::join_path(procfs_, "diskstats"), kiwi::kTableReadCap),
      filter_(ctx.options.get_strings("include"), ctx.options.get_strings("exclude")),
      partitions_(ctx.options.get_bool("partitions")),
      wear_(ctx.options.get_bool("wear")),
      log_(ctx.log) {}

void DiskioSensor::emit_wear(const std::string& device, const std::string& dir,
                             kiwi::MetricSink& sink, std::vector<std::string>& notes) {
  // Read each sample: the kernel prints what it read from the card when it found it (two small
  // sysfs reads, no card I/O), and a card replaced under the same name shows at once. A missing
  // file (an SD card, a kernel before 4.11) is no wear.
  std::vector<std::string> undefined;
  const std::string life_path = kiwi::join_path(dir, "life_time");
  if (const auto estimates = reads_.read(life_path, parse_life_time)) {
    for (std::size_t i = 0; i < estimates->size(); ++i) {
      const std::string type = i == 0 ? "A" : "B";
      const std::uint8_t estimate = (*estimates)[i];
      if (const auto used = life_used(estimate)) {
        sink.emit(kLifeUsedLower, {device, type}, used->lower);
        sink.emit(kLifeUsedUpper, {device, type}, used->upper);
      } else if (estimate == 0) {
        undefined.push_back("life_time type " + type);
      } else {
        reads_.note(life_path + ": type " + type + " is " + hex_byte(estimate) +
                    ", past JEDEC's scale (0x01 to 0x0b)");
      }
    }
  }
  const std::string eol_path = kiwi::join_path(dir, "pre_eol_info");
  if (const auto byte = reads_.read(eol_path, parse_ext_csd_byte)) {
    if (const auto level = pre_eol_level(*byte))
      sink.emit(kPreEol, {device}, *level);
    else if (*byte == 0)
      undefined.push_back("pre_eol_info");
    else
      reads_.note(eol_path + ": " + hex_byte(*byte) + ", past JEDEC's scale (0x01 to 0x03)");
  }
  if (!undefined.empty())
    notes.push_back(device + ": " + kiwi::join(undefined, ", ") +
                    " 0x00, not defined by the device: left out");
}

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
    wear_dirs_.clear();
    for (const auto& disk : all) {
      names_.push_back(disk.name);
      reported_.push_back(filter_.passes(disk.name) &&
                          (partitions_ || !know_disks ||
                           exists(kiwi::join_path(block_dir, sysfs_block_name(disk.name)))));
      // <sysfs>/block/mmcblkN/device is the card (a symlink to .../mmc0:0001).
      wear_dirs_.push_back(wear_ && reported_.back() && is_mmc_card(disk.name)
                               ? kiwi::join_path(block_dir, disk.name + "/device")
                               : "");
    }
  }

  bool any = false;
  std::vector<std::string> notes{note_};
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (!reported_[i]) continue;
    const auto& disk = all[i];
    any = true;
    for (const auto& c : kCounterColumns)
      sink.emit(c.counter, {disk.name},
                static_cast<double>(disk.counters[c.column]) * c.multiplier / c.divisor);
    if (!wear_dirs_[i].empty()) emit_wear(disk.name, wear_dirs_[i], sink, notes);
  }
  // A wear file that cannot be read or parsed is named (and logged once); the counters still count.
  notes.push_back(reads_.finish(log_));
  if (!any)
    return kiwi::SampleResult::no_data(
        "no block devices left after include, exclude and partitions");
  std::erase(notes, std::string());
  return kiwi::SampleResult::ok(kiwi::join(notes));
}

}  // namespace kiwi::diskio
