// The storage sensor: size, use and inodes of every real filesystem in /proc/self/mountinfo,
// via statvfs. See README.md for the metrics and which mounts are left out.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <kiwi/sensor.hpp>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "storage_parse.hpp"

namespace kiwi::storage {

// The one place the storage options and their defaults are declared (plugin.cpp registers it; the
// host fills in defaults; tests build Options from it). The defaults follow node_exporter's
// filesystem collector: pseudo, RAM-backed, container-layer and image filesystems are left out.
inline constexpr kiwi::OptionSpec kOptions[] = {
    {"include_types", kiwi::OptionType::string_list, R"(["*"])",
     "filesystem type globs to report (\"ext4\", \"fuse.*\"; `*` matches any run of characters)"},
    {"exclude_types", kiwi::OptionType::string_list,
     R"(["autofs", "binfmt_misc", "bpf", "cgroup", "cgroup2", "configfs", "debugfs", "devpts", )"
     R"("devtmpfs", "efivarfs", "erofs", "fuse.gvfsd-fuse", "fuse.lxcfs", "fuse.portal", )"
     R"("fuse.snapfuse", "fusectl", "hugetlbfs", "mqueue", "nfsd", "nsfs", "overlay", "proc", )"
     R"("pstore", "ramfs", "rpc_pipefs", "securityfs", "selinuxfs", "squashfs", "sysfs", )"
     R"("tmpfs", "tracefs"])",
     "filesystem type globs not reported, even if included"},
    {"include_mounts", kiwi::OptionType::string_list, R"(["/"])",
     "mount points reported, with everything below them (\"/\" is all)"},
    {"exclude_mounts", kiwi::OptionType::string_list,
     R"(["/proc", "/sys", "/dev", "/run/user", "/snap"])",
     "mount points not reported, with everything below them (\"/dev\" also drops /dev/shm)"},
    {"statvfs_timeout", kiwi::OptionType::duration, "\"1s\"",
     "how long to wait for statvfs before reporting the mount as not answering", true, 1, 60'000},
    {"rootfs", kiwi::OptionType::string, R"("/")",
     "directory the mount points are found under (\"/host\" when the host's / is mounted there)"},
};

// statvfs on a live path; throws std::system_error naming the path on failure. Called on a worker
// thread (see StorageSensor), so it must not touch the sensor.
using StatFunction = std::function<FsStats(const std::string& path)>;

// The real one, ::statvfs.
FsStats statvfs_stats(const std::string& path);

// The metrics, each declared once: the sensor emits through these rows, and kMetricSpecs
// (plugin.cpp registers it) is the HELP text of /metrics and the README table. The usage metrics
// name the FsUsage field they come from.
struct UsageMetric {
  kiwi::MetricSpec metric;
  double FsUsage::*field;
};
inline constexpr UsageMetric kUsageMetrics[] = {
    {kiwi::gauge("storage_size_bytes", kiwi::Unit::bytes, "mount",
                 "filesystem size (statvfs f_blocks x f_frsize)"),
     &FsUsage::size_bytes},
    {kiwi::gauge("storage_available_bytes", kiwi::Unit::bytes, "mount",
                 "space available to unprivileged users (f_bavail)"),
     &FsUsage::available_bytes},
    {kiwi::gauge("storage_used_bytes", kiwi::Unit::bytes, "mount",
                 "space in use: size minus free (f_bfree)"),
     &FsUsage::used_bytes},
    {kiwi::gauge("storage_used_ratio", kiwi::Unit::ratio, "mount",
                 "used / (used + available), as df reports Use%"),
     &FsUsage::used_ratio},
    {kiwi::gauge("storage_inodes", kiwi::Unit::count, "mount",
                 "inodes on the filesystem (f_files)"),
     &FsUsage::inodes_total},
    {kiwi::gauge("storage_inodes_free", kiwi::Unit::count, "mount", "free inodes (f_ffree)"),
     &FsUsage::inodes_free},
};
inline constexpr kiwi::MetricSpec kReadonly =
    kiwi::gauge("storage_readonly", kiwi::Unit::none, "mount",
                "1 if the filesystem is mounted read-only, else 0");

// As node_exporter's node_filesystem_device_error: a mount whose statvfs failed or timed out
// has no usage metrics this sample, only this at 1 (the message says why).
inline constexpr kiwi::MetricSpec kError =
    kiwi::gauge("storage_error", kiwi::Unit::none, "mount",
                "1 if statvfs failed or timed out on the mount this sample, else 0");

inline constexpr auto kMetricSpecs = [] {
  std::array<kiwi::MetricSpec, std::size(kUsageMetrics) + 2> all{};
  std::size_t n = 0;
  for (const auto& u : kUsageMetrics) all[n++] = u.metric;
  all[n++] = kReadonly;
  all[n++] = kError;
  return all;
}();

class StorageSensor final : public kiwi::Sensor {
 public:
  // Copies the procfs root and options; reads nothing. Mount points from mountinfo are passed to
  // statvfs under the rootfs option (a path of the live system, not of the procfs tree).
  explicit StorageSensor(const kiwi::SensorContext& ctx);
  // For tests: the same, with statvfs replaced.
  StorageSensor(const kiwi::SensorContext& ctx, StatFunction stat);
  ~StorageSensor() override;
  StorageSensor(const StorageSensor&) = delete;
  StorageSensor& operator=(const StorageSensor&) = delete;

  kiwi::SampleResult sample(kiwi::MetricSink& sink) override;

 private:
  struct Call;  // one statvfs, inline or on its own thread (shared with that thread)

  std::shared_ptr<Call> start_call(const MountEntry& mount) const;
  static void run_call(Call& call, const StatFunction& stat, const std::string& path);
  // The selected mounts, parsed again only when the mount table may have changed.
  const std::vector<MountEntry>& current_mounts();

  std::string procfs_;
  MountFilter filter_;
  std::chrono::milliseconds timeout_;
  std::string rootfs_;
  StatFunction stat_;
  kiwi::Logger& log_;
  std::function<void()> keep_loaded_;  // called once a statvfs thread is left behind
  std::set<std::string> failing_;      // mounts whose statvfs failed last time, to log changes once
  // Mounts whose statvfs did not answer in time, with the call still running. A mount here is not
  // asked again until that call returns, so a dead NFS server costs one thread, not one per tick.
  std::map<std::string, std::shared_ptr<Call>> hung_;
  // <procfs>/self/mountinfo kept open when it is the kernel's: poll() flags it (POLLPRI) when the
  // mount table changes, so it is read and parsed again only then. A fixture tree's plain file is
  // read every sample.
  int mountinfo_fd_ = -1;
  bool mounts_valid_ = false;
  std::vector<MountEntry> mounts_;
};

}  // namespace kiwi::storage
