// storage plugin: mountinfo parsing, mount selection and df arithmetic on fixture text, and the
// sensor with statvfs replaced by a table (statvfs works on the live filesystem, not on fixtures).
#include <catch2/catch.hpp>
#include <cerrno>
#include <map>
#include <system_error>

#include "sensor_test_util.hpp"
#include "storage_parse.hpp"
#include "storage_sensor.hpp"

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

std::vector<kiwi::storage::MountEntry> selected(const std::string& board) {
  return kiwi::storage::select_mounts(
      kiwi::storage::parse_mountinfo(read_text(fixture(board + "/proc/self/mountinfo"))),
      default_list("exclude_types"), default_list("exclude_mounts"));
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
      {}, {});
  // sda1: /mnt/disk is the shortest; sda2: two of equal length, the first one wins.
  CHECK(mount_points(mounts) == std::vector<std::string>{"/mnt/disk", "/mnt/aaaa"});
}

TEST_CASE("storage: a directory mounted over is reported once, for the filesystem on top") {
  const auto mounts = kiwi::storage::select_mounts(
      kiwi::storage::parse_mountinfo("40 1 8:1 / /data rw - ext4 /dev/sda1 rw\n"
                                     "41 1 8:17 / /data rw - xfs /dev/sdb1 rw\n"),
      {}, {});
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

TEST_CASE("storage: the sensor on an RK3588 emits 7 metrics per mount, labelled by mount point") {
  Harness h(fixture("rk3588"), defaults());
  kiwi::storage::StorageSensor sensor(
      h.context(),
      fake_statvfs({{"/", kDisk}, {"/srv/nvme", kDisk}, {"/media/kiwi/USB DISK", kDisk}}));
  const auto result = sensor.sample(h.sink);
  CHECK(result.status == kiwi::SampleStatus::ok);
  CHECK(result.message.empty());
  CHECK(h.sink.samples.size() == 21);
  CHECK(h.sink.label_values("storage_size_bytes", "mount") ==
        std::vector<std::string>{"/", "/srv/nvme", "/media/kiwi/USB DISK"});
  CHECK(h.sink.value("storage_used_bytes", {{"mount", "/"}}) == 2457600000.0);
  CHECK(h.sink.find("storage_used_ratio", {{"mount", "/"}})->unit == "ratio");
  CHECK(h.sink.find("storage_inodes_free", {{"mount", "/"}})->unit == "count");
  CHECK(h.sink.value("storage_readonly", {{"mount", "/"}}) == 0.0);
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

TEST_CASE("storage: no real mounts at all is no data; statvfs failing everywhere is an error") {
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

TEST_CASE("storage: sample.toml shows the option table's defaults") {
  CHECK(
      kiwi_sensor_test::keys_missing_from_sample_toml("storage", kiwi::storage::kOptions).empty());
}
