#include "storage_sensor.hpp"

#include <sys/statvfs.h>

#include <cerrno>
#include <kiwi/io.hpp>
#include <stdexcept>
#include <system_error>

namespace kiwi::storage {
namespace {

struct UsageMetric {
  std::string_view name;
  std::string_view unit;
  double FsUsage::*field;
};
constexpr UsageMetric kUsageMetrics[] = {
    {"storage_size_bytes", "bytes", &FsUsage::size_bytes},
    {"storage_available_bytes", "bytes", &FsUsage::available_bytes},
    {"storage_used_bytes", "bytes", &FsUsage::used_bytes},
    {"storage_used_ratio", "ratio", &FsUsage::used_ratio},
    {"storage_inodes", "count", &FsUsage::inodes_total},
    {"storage_inodes_free", "count", &FsUsage::inodes_free},
};

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out.append(out.empty() ? "" : "; ").append(p);
  return out;
}

}  // namespace

FsStats statvfs_stats(const std::string& mount_point) {
  struct statvfs v {};
  if (::statvfs(mount_point.c_str(), &v) != 0)
    throw std::system_error(errno, std::generic_category(), "statvfs " + mount_point);
  return {
      v.f_frsize ? v.f_frsize : v.f_bsize, v.f_blocks, v.f_bfree, v.f_bavail, v.f_files, v.f_ffree};
}

StorageSensor::StorageSensor(const kiwi::SensorContext& ctx) : StorageSensor(ctx, statvfs_stats) {}

StorageSensor::StorageSensor(const kiwi::SensorContext& ctx, StatFunction stat)
    : procfs_(ctx.procfs),
      exclude_types_(ctx.options.get_strings("exclude_types")),
      exclude_mounts_(ctx.options.get_strings("exclude_mounts")),
      stat_(std::move(stat)),
      log_(ctx.log) {}

kiwi::SampleResult StorageSensor::sample(kiwi::MetricSink& sink) {
  const std::string path = kiwi::join_path(procfs_, "self/mountinfo");
  const auto text = kiwi::read_file(path);
  if (!text) throw std::runtime_error(path + ": not found");
  std::vector<MountEntry> mounts;
  try {
    mounts = select_mounts(parse_mountinfo(*text), exclude_types_, exclude_mounts_);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(path + ": " + e.what());
  }

  std::size_t reported = 0;
  std::vector<std::string> failed;
  std::set<std::string> failing_now;
  for (const auto& m : mounts) {
    FsStats stats;
    try {
      stats = stat_(m.mount_point);
    } catch (const std::system_error& e) {
      // EACCES on a private mount, ESTALE from a gone NFS server: skip it, keep the others.
      failed.push_back(m.mount_point + " (" + e.what() + ")");
      failing_now.insert(m.mount_point);
      if (!failing_.count(m.mount_point)) log_.warn("storage: skipped " + failed.back());
      continue;
    }
    if (stats.blocks == 0) continue;  // a pseudo filesystem the type list missed; df hides these
    const FsUsage usage = compute_usage(stats);
    for (const auto& metric : kUsageMetrics)
      sink.gauge(metric.name, {{"mount", m.mount_point}}, usage.*metric.field, metric.unit);
    sink.gauge("storage_readonly", {{"mount", m.mount_point}}, m.readonly ? 1 : 0, "");
    ++reported;
  }
  for (const auto& mount : failing_)
    if (!failing_now.count(mount)) log_.info("storage: statvfs works again on " + mount);
  failing_ = std::move(failing_now);

  if (reported == 0 && !failed.empty())
    throw std::runtime_error("statvfs failed on every mount: " + join(failed));
  if (reported == 0)
    return kiwi::SampleResult::no_data(
        "no mounts left after exclude_types, exclude_mounts and empty filesystems");
  return kiwi::SampleResult::ok(failed.empty() ? "" : "skipped " + join(failed));
}

}  // namespace kiwi::storage
