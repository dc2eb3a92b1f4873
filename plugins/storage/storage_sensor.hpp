// The storage sensor: size, use and inodes of every real filesystem in /proc/self/mountinfo,
// via statvfs. See README.md for the metrics and which mounts are left out.
#pragma once

#include <functional>
#include <kiwi/sensor.hpp>
#include <set>
#include <string>
#include <vector>

#include "storage_parse.hpp"

namespace kiwi::storage {

// The one place the storage options and their defaults are declared (plugin.cpp registers it; the
// host fills in defaults; tests build Options from it).
inline constexpr kiwi::OptionSpec kOptions[] = {
    {"exclude_types", kiwi::OptionType::string_list,
     R"(["autofs", "binfmt_misc", "bpf", "cgroup", "cgroup2", "configfs", "debugfs", "devpts", )"
     R"("devtmpfs", "efivarfs", "fuse.gvfsd-fuse", "fuse.lxcfs", "fuse.portal", )"
     R"("fuse.snapfuse", "fusectl", "hugetlbfs", "mqueue", "nfsd", "nsfs", "overlay", "proc", )"
     R"("pstore", "ramfs", "rpc_pipefs", "securityfs", "selinuxfs", "squashfs", "sysfs", )"
     R"("tmpfs", "tracefs"])",
     "filesystem types not reported (exact match on the mountinfo fstype)"},
    {"exclude_mounts", kiwi::OptionType::string_list,
     R"(["/proc", "/sys", "/dev", "/run/user", "/snap"])",
     "mount points not reported, with everything below them (\"/dev\" also drops /dev/shm)"},
};

// statvfs on a live path; throws std::system_error naming the path on failure.
using StatFunction = std::function<FsStats(const std::string& mount_point)>;

// The real one, ::statvfs.
FsStats statvfs_stats(const std::string& mount_point);

class StorageSensor final : public kiwi::Sensor {
 public:
  // Copies the procfs root and options; reads nothing. Mount points from mountinfo are passed to
  // statvfs as they are (absolute paths of the live system), not under the procfs root.
  explicit StorageSensor(const kiwi::SensorContext& ctx);
  // For tests: the same, with statvfs replaced.
  StorageSensor(const kiwi::SensorContext& ctx, StatFunction stat);

  kiwi::SampleResult sample(kiwi::MetricSink& sink) override;

 private:
  std::string procfs_;
  std::vector<std::string> exclude_types_;
  std::vector<std::string> exclude_mounts_;
  StatFunction stat_;
  kiwi::Logger& log_;
  std::set<std::string> failing_;  // mounts whose statvfs failed last time, to log changes once
};

}  // namespace kiwi::storage
