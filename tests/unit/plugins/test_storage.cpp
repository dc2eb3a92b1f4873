// storage plugin: mountinfo parsing, mount selection and df arithmetic on fixture text, and the
// sensor with statvfs replaced by a table (statvfs works on the live filesystem, not on fixtures).
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>

#include "config/options.hpp"
#include "options_support.hpp"
#include "plugin/plugin_loader.hpp"
#include "sensor_test_util.hpp"
#include "storage_parse.hpp"
#include "storage_sensor.hpp"
#include "test_support.hpp"

using Catch::Matchers::Contains;
using kiwi_sensor_test::fixture;
using kiwi_sensor_test::Harness;
using kiwi_sensor_test::read_text;

namespace {

std::vector<kiwi::OptionValue> defaults() {
  return kiwi_sensor_test::default_values(kiwi::storage::kOptions);
}

// The default option lists, as the host would fill them in.
std::vector<std::string> default_list(std::string_view key) {
  for (const auto& v : defaults())
    if (v.key == key) return v.string_list;
  throw std::logic_error("no option");
}

std::vector<std::string> mount_points(const std::vector<kiwi::storage::MountEntry>& mounts) {
  std::vector<std::string> out;
  for (const auto& m : mounts) out.push_back(m.mount_point);
  return out;
}

// The mount filter the default options make, as the sensor builds it.
kiwi::storage::MountFilter default_filter() {
  return {default_list("include_types"), default_list("exclude_types"),
          default_list("include_mounts"), default_list("exclude_mounts")};
}

std::vector<kiwi::storage::MountEntry> selected(
    const std::string& board, const kiwi::storage::MountFilter& filter = default_filter()) {
  return kiwi::storage::select_mounts(
      kiwi::storage::parse_mountinfo(read_text(fixture(board + "/proc/self/mountinfo"))), filter);
}

// A statvfs stand-in: known mount points get fixed numbers, others fail with `error`.
kiwi::storage::StatFunction fake_statvfs(std::map<std::string, kiwi::storage::FsStats> table,
                                         int error = ENOENT) {
  return [table = std::move(table), error](const std::string& path) {
    auto it = table.find(path);
    if (it == table.end())
      throw std::system_error(error, std::generic_category(), "statvfs " + path);
    return it->second;
  };
}

// 4 KiB blocks: 1000000 blocks, 400000 free of which 350000 available (5% root reserve).
constexpr kiwi::storage::FsStats kDisk{4096, 1000000, 400000, 350000, 250000, 200000};

}  // namespace

TEST_CASE("storage: octal escapes in mount points are decoded") {
  CHECK(kiwi::storage::decode_octal_escapes(R"(/media/kiwi/USB\040DISK)") ==
        "/media/kiwi/USB DISK");
  CHECK(kiwi::storage::decode_octal_escapes(R"(/a\011b\012c\134d)") == "/a\tb\nc\\d");
  CHECK(kiwi::storage::decode_octal_escapes(R"(/trailing\04)") == R"(/trailing\04)");
  CHECK(kiwi::storage::decode_octal_escapes(R"(/not\9octal)") == R"(/not\9octal)");
}

TEST_CASE("storage: an RK3588 mountinfo line parses into its fields") {
  const auto mounts =
      kiwi::storage::parse_mountinfo(read_text(fixture("rk3588/proc/self/mountinfo")));
  REQUIRE(mounts.size() == 23);
  const auto& root = mounts[5];
  CHECK(root.mount_point == "/");
  CHECK(root.device == "179:2");
  CHECK(root.fstype == "ext4");
  CHECK(root.source == "/dev/mmcblk0p2");
  CHECK(root.mount_options == "rw,noatime");
  CHECK(root.super_options == "rw,commit=600,errors=remount-ro");
  CHECK_FALSE(root.readonly);
  CHECK(mounts[21].mount_point == "/media/kiwi/USB DISK");
  CHECK(mounts[20].root == "/srv/share");  // a bind mount of a directory on the root filesystem
}

TEST_CASE("storage: a mountinfo line without the ' - ' separator is refused with its number") {
  CHECK_THROWS_WITH(kiwi::storage::parse_mountinfo(
                        "30 1 179:2 / / rw - ext4 /dev/root rw\n31 1 8:1 / /x rw ext4 /dev/sda1\n"),
                    Contains("line 2"));
}

TEST_CASE("storage: read-only comes from the mount or the superblock options") {
  CHECK(kiwi::storage::has_option("ro,relatime", "ro"));
  CHECK_FALSE(kiwi::storage::has_option("rw,errors=remount-ro", "ro"));
  const auto mounts = kiwi::storage::parse_mountinfo(
      "1 0 7:0 / /a ro,nodev - squashfs /dev/loop0 ro\n"
      "2 0 8:1 / /b rw,relatime - ext4 /dev/sda1 ro,errors=remount-ro\n"
      "3 0 8:2 / /c rw,relatime - ext4 /dev/sda2 rw,errors=remount-ro\n");
  CHECK(mounts[0].readonly);
  CHECK(mounts[1].readonly);  // ext4 remounted read-only after an error
  CHECK_FALSE(mounts[2].readonly);
}

TEST_CASE("storage: mount prefixes match whole path components") {
  CHECK(kiwi::storage::under_path("/dev", "/dev"));
  CHECK(kiwi::storage::under_path("/dev/shm", "/dev"));
  CHECK(kiwi::storage::under_path("/dev/shm", "/dev/"));
  CHECK_FALSE(kiwi::storage::under_path("/devices", "/dev"));
  CHECK(kiwi::storage::under_path("/anything", "/"));
}

TEST_CASE("storage: pseudo filesystems are left out on an RK3588 and the bind mount appears once") {
  CHECK(mount_points(selected("rk3588")) ==
        std::vector<std::string>{"/", "/srv/nvme", "/media/kiwi/USB DISK"});
}

TEST_CASE("storage: a Raspberry Pi 4 reports the SD card root and the firmware partition") {
  CHECK(mount_points(selected("rpi4")) == std::vector<std::string>{"/", "/boot/firmware"});
}

TEST_CASE("storage: on a VM overlay, tmpfs, proc, sysfs, squashfs snaps and nsfs are left out") {
  CHECK(mount_points(selected("vm")) ==
        std::vector<std::string>{"/", "/boot/efi", "/mnt/iso", "/mnt/backup"});
}

TEST_CASE("storage: a bind mount is reported once, at its shortest mount point") {
  const auto mounts = kiwi::storage::select_mounts(
      kiwi::storage::parse_mountinfo("40 1 8:1 /data /srv/data/share rw - ext4 /dev/sda1 rw\n"
                                     "41 1 8:1 / /mnt/disk rw - ext4 /dev/sda1 rw\n"
                                     "42 1 8:1 /data /home/me/d rw - ext4 /dev/sda1 rw\n"
                                     "43 1 8:2 / /mnt/aaaa rw - ext4 /dev/sda2 rw\n"
                                     "44 1 8:2 / /mnt/bbbb rw - ext4 /dev/sda2 rw\n"),
      {});
  // sda1: /mnt/disk is the shortest; sda2: two of equal length, the first one wins.
  CHECK(mount_points(mounts) == std::vector<std::string>{"/mnt/disk", "/mnt/aaaa"});
}

TEST_CASE("storage: a directory mounted over is reported once, for the filesystem on top") {
  const auto mounts = kiwi::storage::select_mounts(
      kiwi::storage::parse_mountinfo("40 1 8:1 / /data rw - ext4 /dev/sda1 rw\n"
                                     "41 1 8:17 / /data rw - xfs /dev/sdb1 rw\n"),
      {});
  REQUIRE(mounts.size() == 1);
  CHECK(mounts[0].source == "/dev/sdb1");
}

TEST_CASE("storage: used ratio counts the root reserve as df does") {
  const auto u = kiwi::storage::compute_usage(kDisk);
  CHECK(u.size_bytes == 4096000000.0);
  CHECK(u.available_bytes == 1433600000.0);  // 350000 * 4096
  CHECK(u.used_bytes == 2457600000.0);       // (1000000 - 400000) * 4096
  CHECK(u.used_ratio == Approx(600000.0 / 950000.0));
  CHECK(u.inodes_total == 250000.0);
  CHECK(u.inodes_free == 200000.0);
}

TEST_CASE("storage: a full filesystem reads 100% used, an empty one 0%") {
  CHECK(kiwi::storage::compute_usage({4096, 1000, 50, 0, 10, 0}).used_ratio == 1.0);
  CHECK(kiwi::storage::compute_usage({4096, 1000, 1000, 1000, 10, 10}).used_ratio == 0.0);
}

TEST_CASE("storage: the sensor on an RK3588 emits 8 metrics per mount, labelled by mount point") {
  Harness h(fixture("rk3588"), defaults());
  kiwi::storage::StorageSensor sensor(
      h.context(),
      fake_statvfs({{"/", kDisk}, {"/srv/nvme", kDisk}, {"/media/kiwi/USB DISK", kDisk}}));
  const auto result = sensor.sample(h.sink);
  CHECK(result.status == kiwi::SampleStatus::ok);
  CHECK(result.message.empty());
  CHECK(h.sink.samples.size() == 24);
  CHECK(h.sink.label_values("storage_size_bytes", "mount") ==
        std::vector<std::string>{"/", "/srv/nvme", "/media/kiwi/USB DISK"});
  CHECK(h.sink.value("storage_used_bytes", {{"mount", "/"}}) == 2457600000.0);
  CHECK(h.sink.find("storage_used_ratio", {{"mount", "/"}})->unit == "ratio");
  CHECK(h.sink.find("storage_inodes_free", {{"mount", "/"}})->unit == "count");
  CHECK(h.sink.value("storage_readonly", {{"mount", "/"}}) == 0.0);
  CHECK(h.sink.value("storage_error", {{"mount", "/"}}) == 0.0);
}

TEST_CASE("storage: a read-only ISO is flagged and a stale NFS mount is skipped by name") {
  Harness h(fixture("vm"), defaults());
  kiwi::storage::StorageSensor sensor(
      h.context(), fake_statvfs({{"/", kDisk}, {"/boot/efi", kDisk}, {"/mnt/iso", kDisk}}, ESTALE));
  const auto result = sensor.sample(h.sink);
  CHECK(result.status == kiwi::SampleStatus::ok);
  CHECK_THAT(result.message, Contains("/mnt/backup") && Contains("Stale file handle"));
  CHECK(h.sink.value("storage_readonly", {{"mount", "/mnt/iso"}}) == 1.0);
  CHECK_FALSE(h.sink.value("storage_size_bytes", {{"mount", "/mnt/backup"}}));
  // As node_exporter's node_filesystem_device_error: the failing mount is there, at 1.
  CHECK(h.sink.value("storage_error", {{"mount", "/mnt/backup"}}) == 1.0);
  CHECK(h.sink.value("storage_error", {{"mount", "/mnt/iso"}}) == 0.0);
  CHECK(h.log.count(kiwi::LogLevel::warn) == 1);
  sensor.sample(h.sink);
  CHECK(h.log.count(kiwi::LogLevel::warn) == 1);  // logged when it starts failing, not every second
}

TEST_CASE("storage: a filesystem reporting 0 blocks is left out, as df does") {
  Harness h(fixture("rpi4"), defaults());
  kiwi::storage::StorageSensor sensor(
      h.context(), fake_statvfs({{"/", kDisk}, {"/boot/firmware", {512, 0, 0, 0, 0, 0}}}));
  sensor.sample(h.sink);
  CHECK(h.sink.label_values("storage_size_bytes", "mount") == std::vector<std::string>{"/"});
}

TEST_CASE("storage: no real mounts at all is no data, statvfs failing everywhere is an error") {
  Harness h(fixture("rk3588"), kiwi_sensor_test::with_strings(defaults(), "exclude_mounts", {"/"}));
  kiwi::storage::StorageSensor none(h.context(), fake_statvfs({}));
  const auto result = none.sample(h.sink);
  CHECK(result.status == kiwi::SampleStatus::no_data);

  Harness h2(fixture("rk3588"), defaults());
  kiwi::storage::StorageSensor failing(h2.context(), fake_statvfs({}, EACCES));
  CHECK_THROWS_WITH(failing.sample(h2.sink),
                    Contains("statvfs failed on every mount") && Contains("Permission denied"));
}

TEST_CASE("storage: exclude_types can be changed to report tmpfs") {
  auto types = default_list("exclude_types");
  std::erase(types, "tmpfs");
  Harness h(fixture("rpi4"), kiwi_sensor_test::with_strings(defaults(), "exclude_types", types));
  kiwi::storage::StorageSensor sensor(
      h.context(),
      fake_statvfs(
          {{"/", kDisk}, {"/run", kDisk}, {"/run/lock", kDisk}, {"/boot/firmware", kDisk}}));
  CHECK(sensor.sample(h.sink).message.empty());
  // /dev/shm and /run/user/1000 are tmpfs too, but under the default exclude_mounts.
  CHECK(h.sink.label_values("storage_size_bytes", "mount") ==
        std::vector<std::string>{"/", "/run", "/run/lock", "/boot/firmware"});
}

TEST_CASE("storage: the real statvfs works on / and names the path when it fails") {
  const auto root = kiwi::storage::statvfs_stats("/");
  CHECK(root.block_size > 0);
  CHECK_THROWS_WITH(kiwi::storage::statvfs_stats("/nonexistent/kiwi"),
                    Contains("/nonexistent/kiwi"));
}

TEST_CASE("storage: an x86 mini PC reports its NVMe root, EFI partition and data drive") {
  CHECK(mount_points(selected("x86")) == std::vector<std::string>{"/", "/boot/efi", "/data"});
}

TEST_CASE("storage: include_types and include_mounts narrow the report, exclusions still win") {
  auto filter = default_filter();
  filter.include_types = {"ext*"};
  CHECK(mount_points(selected("rk3588", filter)) == std::vector<std::string>{"/", "/srv/nvme"});

  filter = default_filter();
  filter.include_mounts = {"/media", "/srv", "/proc"};  // /proc stays excluded
  CHECK(mount_points(selected("rk3588", filter)) ==
        std::vector<std::string>{"/srv/nvme", "/media/kiwi/USB DISK"});

  filter = default_filter();
  filter.exclude_types.push_back("fuse*");  // a glob: fuseblk, fuse.sshfs, ...
  CHECK(mount_points(selected("awkward", filter)) ==
        std::vector<std::string>{"/", "/srv/data", "/mnt/ro", "/mnt/tab\tand\\backslash",
                                 "/var/log"});
}

TEST_CASE("storage: awkward mounts: a filesystem bound three times, escapes, a read-only disk") {
  const auto mounts = selected("awkward");
  // /dev/sda1 is at /srv/data, /home/odroid/data and (a subdirectory) /var/www/data: once.
  CHECK(mount_points(mounts) == std::vector<std::string>{"/", "/srv/data", "/mnt/ro",
                                                         "/mnt/My Book", "/mnt/tab\tand\\backslash",
                                                         "/var/log"});
  CHECK(mounts[2].readonly);
  CHECK_FALSE(mounts[3].readonly);
  CHECK(mounts[3].fstype == "fuseblk");
}

TEST_CASE("storage: a full filesystem reads 100% used with nothing available") {
  // /mnt/ro: 1000 blocks, 0 free; /srv/data: every block gone but the 5% root reserve.
  Harness h(fixture("awkward"), defaults());
  kiwi::storage::StorageSensor sensor(
      h.context(), fake_statvfs({{"/", kDisk},
                                 {"/srv/data", {4096, 1000000, 50000, 0, 1000, 10}},
                                 {"/mnt/ro", {4096, 1000, 0, 0, 64, 0}},
                                 {"/mnt/My Book", kDisk},
                                 {"/mnt/tab\tand\\backslash", kDisk},
                                 {"/var/log", kDisk}}));
  const auto result = sensor.sample(h.sink);
  CHECK(result.message.empty());
  CHECK(h.sink.value("storage_used_ratio", {{"mount", "/srv/data"}}) == 1.0);
  CHECK(h.sink.value("storage_available_bytes", {{"mount", "/srv/data"}}) == 0.0);
  CHECK(h.sink.value("storage_used_ratio", {{"mount", "/mnt/ro"}}) == 1.0);
  CHECK(h.sink.value("storage_readonly", {{"mount", "/mnt/ro"}}) == 1.0);
  CHECK(h.sink.value("storage_inodes_free", {{"mount", "/mnt/ro"}}) == 0.0);
  CHECK(h.sink.label_values("storage_size_bytes", "mount").size() == 6);
}

TEST_CASE("storage: rootfs puts the mount points under another directory, labels unchanged") {
  std::mutex mutex;
  std::vector<std::string> asked;
  auto record = [&](const std::string& path) {  // called from worker threads: lock
    std::lock_guard lock(mutex);
    asked.push_back(path);
    return kDisk;
  };
  Harness h(fixture("rpi4"), kiwi_sensor_test::with_string(defaults(), "rootfs", "/host/"));
  kiwi::storage::StorageSensor sensor(h.context(), record);
  sensor.sample(h.sink);
  std::sort(asked.begin(), asked.end());  // asked from worker threads, in any order
  CHECK(asked == std::vector<std::string>{"/host/", "/host/boot/firmware"});
  CHECK(h.sink.label_values("storage_size_bytes", "mount") ==
        std::vector<std::string>{"/", "/boot/firmware"});
}

namespace {

// A statvfs for the vm board whose /mnt/backup (the NFS share) blocks until released, as a hard
// NFS mount does while its server is away. Released at the latest after 20 s, so a sensor that
// waits forever fails the test instead of hanging it.
struct DeadNfs {
  struct Gate {
    std::mutex mutex;
    std::condition_variable cv;
    bool open = false;
    std::atomic<int> calls{0};
  };
  std::shared_ptr<Gate> gate = std::make_shared<Gate>();

  kiwi::storage::StatFunction stat() const {
    return [gate = gate](const std::string& path) {
      if (path != "/mnt/backup") return kDisk;
      ++gate->calls;
      std::unique_lock lock(gate->mutex);
      gate->cv.wait_for(lock, std::chrono::seconds(20), [&] { return gate->open; });
      return kDisk;
    };
  }
  void release() const {
    {
      std::lock_guard lock(gate->mutex);
      gate->open = true;
    }
    gate->cv.notify_all();
  }
  ~DeadNfs() { release(); }
};

}  // namespace

TEST_CASE("storage: a hanging statvfs is bounded by statvfs_timeout and not asked again") {
  DeadNfs nfs;
  Harness h(fixture("vm"), kiwi_sensor_test::with_duration(defaults(), "statvfs_timeout",
                                                           std::chrono::milliseconds(50)));
  kiwi::storage::StorageSensor sensor(h.context(), nfs.stat());

  const auto first = sensor.sample(h.sink);
  CHECK(first.status == kiwi::SampleStatus::ok);
  CHECK_THAT(first.message, Contains("skipped /mnt/backup") && Contains("no answer within 50 ms"));
  CHECK(h.sink.label_values("storage_size_bytes", "mount") ==
        std::vector<std::string>{"/", "/boot/efi", "/mnt/iso"});
  CHECK(h.log.count(kiwi::LogLevel::warn) == 1);
  // The thread may return after the sensor is gone: the plugin's code must stay mapped.
  CHECK(h.keep_loaded_calls >= 1);

  // Still hanging: reported as such at once, and no second thread piles up behind the first.
  h.sink.clear();
  const auto second = sensor.sample(h.sink);
  CHECK_THAT(second.message, Contains("/mnt/backup") && Contains("still no answer"));
  CHECK(h.sink.label_values("storage_size_bytes", "mount").size() == 3);
  CHECK(nfs.gate->calls == 1);
  CHECK(h.log.count(kiwi::LogLevel::warn) == 1);

  // The server is back: the hung call returns, the next sample asks afresh and reports the share.
  nfs.release();
  bool back = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!back && std::chrono::steady_clock::now() < deadline) {
    h.sink.clear();
    back = sensor.sample(h.sink).message.empty();  // the released thread needs a moment to end
    if (!back) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(back);
  // Either the late answer was used (it arrived during that sample) or a fresh call was made.
  CHECK(nfs.gate->calls <= 2);
  CHECK(h.sink.value("storage_size_bytes", {{"mount", "/mnt/backup"}}) == 4096000000.0);
  CHECK(h.log.count(kiwi::LogLevel::info) == 1);  // "statvfs works again on /mnt/backup"
}

TEST_CASE("storage: statvfs_timeout is a duration from 1ms to 1m, checked by the host") {
  const kiwi::PluginInfo info{kiwi::PluginKind::sensor, "storage", "", kiwi::storage::kOptions,
                              kiwi::storage::kMetricSpecs};
  auto options = [&](const std::string& line) {
    return kiwi::agent::validate_options(info, kiwi::test::options_table("[options]\n" + line),
                                         "kiwi.toml", "sensor");
  };
  CHECK(options("").get_duration("statvfs_timeout") == std::chrono::seconds(1));
  CHECK(options("statvfs_timeout = \"250ms\"").get_duration("statvfs_timeout") ==
        std::chrono::milliseconds(250));
  CHECK(options("statvfs_timeout = \"1m\"").get_duration("statvfs_timeout") ==
        std::chrono::minutes(1));
  for (auto [line, why] : {std::pair{"statvfs_timeout = \"0ms\"", "out of range: 1ms..1m"},
                           {"statvfs_timeout = \"61s\"", "out of range: 1ms..1m"},
                           {"statvfs_timeout = 1000", "expected a duration"},
                           {"statvfs_timeout = \"soon\"", "expected a duration"}}) {
    INFO(line);
    CHECK_THROWS_WITH(options(line), Contains("kiwi.toml:2:") &&
                                         Contains("sensor.options.statvfs_timeout") &&
                                         Contains(why));
  }
}

TEST_CASE("storage: local disk filesystems are asked inline, anything that may hang on a thread") {
  using kiwi::storage::statvfs_answers_from_memory;
  for (auto t : {"ext4", "ext2", "xfs", "btrfs", "f2fs", "tmpfs"})
    CHECK(statvfs_answers_from_memory(t));
  for (auto t : {"nfs", "nfs4", "cifs", "fuse.sshfs", "9p", "vfat", "ext4x", ""})
    CHECK_FALSE(statvfs_answers_from_memory(t));

  // The vm board: / ext4, /boot/efi vfat, /mnt/iso iso9660, /mnt/backup nfs4.
  std::mutex mutex;
  std::map<std::string, std::thread::id> asked_on;
  Harness h(fixture("vm"), defaults());
  kiwi::storage::StorageSensor sensor(h.context(), [&](const std::string& path) {
    std::lock_guard lock(mutex);
    asked_on[path] = std::this_thread::get_id();
    return kDisk;
  });
  CHECK(sensor.sample(h.sink).status == kiwi::SampleStatus::ok);
  std::lock_guard lock(mutex);
  REQUIRE(asked_on.size() == 4);
  CHECK(asked_on["/"] == std::this_thread::get_id());
  CHECK(asked_on["/boot/efi"] != std::this_thread::get_id());
  CHECK(asked_on["/mnt/backup"] != std::this_thread::get_id());
}

TEST_CASE(
    "storage: a fixture's mountinfo is read every sample, so a changed tree is seen at once") {
  kiwi_sensor_test::ScratchTree tree("vm");
  Harness h(tree.root(), defaults());
  kiwi::storage::StorageSensor sensor(h.context(), [](const std::string&) { return kDisk; });
  sensor.sample(h.sink);
  CHECK(h.sink.label_values("storage_size_bytes", "mount").size() == 4);
  tree.write("proc/self/mountinfo", "29 1 252:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n");
  h.sink.clear();
  sensor.sample(h.sink);
  CHECK(h.sink.label_values("storage_size_bytes", "mount") == std::vector<std::string>{"/"});
}

TEST_CASE("storage: on the live /proc, mountinfo is parsed again when the mount table changes") {
  // A real mount event: a tmpfs mounted and unmounted below a scratch directory (needs root and
  // CAP_SYS_ADMIN, as CI has here). The sensor keeps mountinfo open and re-reads it on POLLPRI.
  kiwi_sensor_test::ScratchTree scratch;
  const std::string dir = scratch.root() + "/mnt";
  auto types = default_list("exclude_types");
  std::erase(types, "tmpfs");
  Harness h("", kiwi_sensor_test::with_strings(
                    kiwi_sensor_test::with_strings(defaults(), "exclude_types", types),
                    "include_mounts", {dir}));
  kiwi::storage::StorageSensor sensor(h.context());
  CHECK(sensor.sample(h.sink).status == kiwi::SampleStatus::no_data);
  {
    kiwi_test::TinyFilesystem tiny(dir, "1m");
    if (!tiny.mounted())
      kiwi_test::skip_test("cannot mount a tmpfs here (needs root); live mountinfo test not run");
    h.sink.clear();
    CHECK(sensor.sample(h.sink).status == kiwi::SampleStatus::ok);
    CHECK(h.sink.value("storage_size_bytes", {{"mount", dir}}) == 1024.0 * 1024);
    h.sink.clear();
    CHECK(sensor.sample(h.sink).status == kiwi::SampleStatus::ok);  // unchanged: from the cache
    CHECK(h.sink.value("storage_size_bytes", {{"mount", dir}}) == 1024.0 * 1024);
  }
  h.sink.clear();
  CHECK(sensor.sample(h.sink).status == kiwi::SampleStatus::no_data);
}
