// diskio plugin: /proc/diskstats parsing, rates, and the sensor on fixture boards. Expected rates
// are the deltas between tests/fixtures/<board>/proc/diskstats and next/proc/diskstats over
// exactly one second of uptime (see the board READMEs).
#include <catch2/catch.hpp>

#include "diskio_parse.hpp"
#include "diskio_sensor.hpp"
#include "sensor_test_util.hpp"

using Catch::Matchers::Contains;
using kiwi_sensor_test::fixture;
using kiwi_sensor_test::Harness;
using kiwi_sensor_test::read_text;
using kiwi_sensor_test::ScratchTree;

namespace {

std::vector<kiwi::OptionValue> defaults() {
  return kiwi_sensor_test::default_values(kiwi::diskio::kOptions);
}

// The metrics of the second of two samples of `board` (its proc tree, then next/ one second later).
kiwi::SampleResult second_sample(std::string_view board, Harness& h, ScratchTree& tree) {
  kiwi::diskio::DiskioSensor sensor(h.context());
  h.sample(sensor);
  tree.advance(board);
  h.sink.clear();
  return h.sample(sensor);
}

}  // namespace

TEST_CASE("diskio: /proc/diskstats of an RK3588 gives every device in file order") {
  const auto disks = kiwi::diskio::parse_diskstats(read_text(fixture("rk3588/proc/diskstats")));
  REQUIRE(disks.size() == 11);
  CHECK(disks[2].name == "mmcblk0");
  // 179 0 mmcblk0 152340 40123 9876544 65432 534210 312345 24681352 876543 0 1234567 942000 ...
  CHECK(disks[2].counters == kiwi::diskio::Counters{152340, 40123, 9876544, 65432, 534210, 312345,
                                                    24681352, 876543, 0, 1234567, 942000});
  CHECK(disks[10].name == "sda1");
}

TEST_CASE("diskio: a 3.10 kernel's 14-field diskstats parses like a 6.1 kernel's 20 fields") {
  const auto disks = kiwi::diskio::parse_diskstats(read_text(fixture("awkward/proc/diskstats")));
  REQUIRE(disks.size() == 15);
  CHECK(disks[0].name == "mmcblk0");
  CHECK(disks[0].counters[9] == 234567u);  // io_ticks, the last counter but one
}

TEST_CASE("diskio: a damaged diskstats line is reported with the line") {
  CHECK_THROWS_WITH(kiwi::diskio::parse_diskstats(" 8 0 sda 1 2 3 4 5 6 7 8 9 ten 11\n"),
                    Contains("sda 1 2") && Contains("'ten'"));
  CHECK_THROWS_WITH(kiwi::diskio::parse_diskstats(" 8 0 sda 1 2 3 4 5 6 7\n"),
                    Contains("at least 11 counters"));
  CHECK_THROWS_WITH(kiwi::diskio::parse_diskstats("eight 0 sda 1 2 3 4 5 6 7 8 9 10 11\n"),
                    Contains("major minor name"));
}

TEST_CASE("diskio: counters are in bytes and seconds exactly, the agent's busy ratio capped at 1") {
  ScratchTree tree;
  tree.write("proc/uptime", "100.00 50.00\n");
  tree.write("proc/diskstats", "179 0 mmcblk0 32 0 2048 0 64 0 8192 0 0 123 0\n");
  Harness h(tree.root(), defaults());
  kiwi::diskio::DiskioSensor sensor(h.context());
  h.sample(sensor);
  const std::map<std::string, std::string> emmc{{"device", "mmcblk0"}};
  CHECK(h.sink.value("diskio_read_bytes_total", emmc) == 1048576.0);  // 2048 sectors of 512
  CHECK(h.sink.value("diskio_written_bytes_total", emmc) == 4194304.0);
  CHECK(h.sink.value("diskio_reads_completed_total", emmc) == 32.0);
  CHECK(h.sink.value("diskio_writes_completed_total", emmc) == 64.0);
  CHECK(h.sink.value("diskio_io_time_seconds_total", emmc) == 0.123);  // not 123 * 0.001
  CHECK(h.sink.find("diskio_io_time_seconds_total", emmc)->kind == kiwi::MetricKind::counter);
  CHECK(h.sink.find("diskio_io_time_seconds_total", emmc)->unit == "seconds");
  CHECK(h.sink.count("diskio_busy_ratio") == 0);  // a rate needs two readings

  // 1010 ms busy in 1000 ms: the counter and the clock are read a little apart.
  tree.write("proc/uptime", "101.00 51.00\n");
  tree.write("proc/diskstats", "179 0 mmcblk0 64 0 4096 0 64 0 8192 0 0 1133 0\n");
  h.sink.clear();
  h.sample(sensor);
  CHECK(h.sink.value("diskio_busy_ratio", emmc) == 1.0);
  CHECK(h.sink.value("diskio_read_bytes_per_second", emmc) == 1048576.0);
  CHECK(h.sink.value("diskio_reads_per_second", emmc) == 32.0);
  CHECK(h.sink.value("diskio_writes_per_second", emmc) == 0.0);
}

TEST_CASE("diskio: a '/' in a diskstats name is '!' in sysfs") {
  CHECK(kiwi::diskio::sysfs_block_name("cciss/c0d0") == "cciss!c0d0");
  CHECK(kiwi::diskio::sysfs_block_name("sda") == "sda");
}

TEST_CASE("diskio: the first sample on an RK3588 lists the disks and has no rates yet") {
  Harness h(fixture("rk3588"), defaults());
  kiwi::diskio::DiskioSensor sensor(h.context());
  const auto result = h.sample(sensor);
  CHECK(result.status == kiwi::SampleStatus::ok);
  CHECK(result.message == "first sample: rates need two readings");
  CHECK(h.sink.count("diskio_busy_ratio") == 0);
  CHECK(h.sink.label_values("diskio_io_time_seconds_total", "device") ==
        std::vector<std::string>{"mmcblk0", "nvme0n1", "sda"});
}

TEST_CASE(
    "diskio: an RK3588 reports the eMMC, NVMe and USB disks, not partitions, loops or boot areas") {
  ScratchTree tree("rk3588");
  Harness h(tree.root(), defaults());
  const auto result = second_sample("rk3588", h, tree);
  CHECK(result.status == kiwi::SampleStatus::ok);
  CHECK(result.message.empty());
  CHECK(h.sink.label_values("diskio_busy_ratio", "device") ==
        std::vector<std::string>{"mmcblk0", "nvme0n1", "sda"});
  const std::map<std::string, std::string> emmc{{"device", "mmcblk0"}};
  CHECK(h.sink.value("diskio_read_bytes_per_second", emmc) == 1048576.0);   // 2048 sectors
  CHECK(h.sink.value("diskio_write_bytes_per_second", emmc) == 4194304.0);  // 8192 sectors
  CHECK(h.sink.value("diskio_reads_per_second", emmc) == 32.0);
  CHECK(h.sink.value("diskio_writes_per_second", emmc) == 64.0);
  CHECK(h.sink.value("diskio_busy_ratio", emmc) == 0.25);
  CHECK(h.sink.find("diskio_busy_ratio", emmc)->unit == "ratio");
  CHECK(h.sink.find("diskio_reads_per_second", emmc)->unit == "per_second");
  CHECK(h.sink.find("diskio_read_bytes_per_second", emmc)->unit == "bytes_per_second");
  CHECK(h.sink.value("diskio_read_bytes_per_second", {{"device", "nvme0n1"}}) == 52428800.0);
  CHECK(h.sink.value("diskio_busy_ratio", {{"device", "nvme0n1"}}) == 0.12);
  CHECK(h.sink.value("diskio_busy_ratio", {{"device", "sda"}}) == 0.0);
}

TEST_CASE("diskio: partitions = true adds the partitions, still without loop devices") {
  ScratchTree tree("rk3588");
  Harness h(tree.root(), kiwi_sensor_test::with_bool(defaults(), "partitions", true));
  second_sample("rk3588", h, tree);
  CHECK(h.sink.label_values("diskio_busy_ratio", "device") ==
        std::vector<std::string>{"mmcblk0", "mmcblk0p1", "mmcblk0p2", "nvme0n1", "nvme0n1p1", "sda",
                                 "sda1"});
  CHECK(h.sink.value("diskio_write_bytes_per_second", {{"device", "mmcblk0p2"}}) == 4194304.0);
}

TEST_CASE("diskio: an empty exclude list reports loop devices and the eMMC boot areas too") {
  ScratchTree tree("rk3588");
  Harness h(tree.root(), kiwi_sensor_test::with_strings(defaults(), "exclude", {}));
  second_sample("rk3588", h, tree);
  CHECK(h.sink.label_values("diskio_busy_ratio", "device") ==
        std::vector<std::string>{"loop0", "loop1", "mmcblk0", "mmcblk0boot0", "mmcblk0boot1",
                                 "nvme0n1", "sda"});
}

TEST_CASE("diskio: a Raspberry Pi 4 reports its SD card and none of its RAM disks") {
  ScratchTree tree("rpi4");
  Harness h(tree.root(), defaults());
  second_sample("rpi4", h, tree);
  CHECK(h.sink.label_values("diskio_busy_ratio", "device") == std::vector<std::string>{"mmcblk0"});
  CHECK(h.sink.value("diskio_write_bytes_per_second", {{"device", "mmcblk0"}}) == 131072.0);
  CHECK(h.sink.value("diskio_busy_ratio", {{"device", "mmcblk0"}}) == 0.04);
}

TEST_CASE("diskio: a VM reports its virtio disk and CD drive, not the snaps' loop devices") {
  ScratchTree tree("vm");
  Harness h(tree.root(), defaults());
  second_sample("vm", h, tree);
  CHECK(h.sink.label_values("diskio_busy_ratio", "device") ==
        std::vector<std::string>{"vda", "sr0"});
  CHECK(h.sink.value("diskio_write_bytes_per_second", {{"device", "vda"}}) == 2097152.0);
  CHECK(h.sink.value("diskio_writes_per_second", {{"device", "vda"}}) == 150.0);
  CHECK(h.sink.value("diskio_busy_ratio", {{"device", "vda"}}) == 0.085);
}

TEST_CASE("diskio: a disk replugged under the same name is skipped once and named") {
  ScratchTree tree("awkward");
  Harness h(tree.root(), defaults());
  const auto result = second_sample("awkward", h, tree);
  CHECK(result.message ==
        "counters went backwards (reset or wrapped), no rates this time for device=sda");
  CHECK(h.log.count(kiwi::LogLevel::info) == 1);
  CHECK(h.sink.label_values("diskio_busy_ratio", "device") ==
        std::vector<std::string>{"mmcblk0", "sdb", "sdc", "sdd"});  // zram* excluded
  CHECK(h.sink.value("diskio_busy_ratio", {{"device", "mmcblk0"}}) == 0.18);
  CHECK(h.sink.value("diskio_write_bytes_per_second", {{"device", "mmcblk0"}}) == 1572864.0);
}

TEST_CASE("diskio: without <sysfs>/block every device is reported, with a note") {
  ScratchTree tree("vm");
  tree.remove("sys/block");
  Harness h(tree.root(), defaults());
  const auto result = second_sample("vm", h, tree);
  CHECK_THAT(result.message, Contains("sys/block not found") && Contains("all reported"));
  CHECK(h.sink.label_values("diskio_busy_ratio", "device") ==
        std::vector<std::string>{"vda", "vda1", "vda14", "vda15", "sr0"});
}

TEST_CASE("diskio: nothing left to report is no data, a missing diskstats is an error") {
  Harness h(fixture("vm"), kiwi_sensor_test::with_strings(defaults(), "include", {"nvme*"}));
  kiwi::diskio::DiskioSensor none(h.context());
  const auto result = h.sample(none);
  CHECK(result.status == kiwi::SampleStatus::no_data);
  CHECK_THAT(result.message, Contains("include, exclude and partitions"));

  ScratchTree empty;
  Harness h2(empty.root(), defaults());
  kiwi::diskio::DiskioSensor missing(h2.context());
  CHECK_THROWS_WITH(h2.sample(missing), Contains("proc/diskstats: not found"));
}

TEST_CASE("diskio: a disk plugged in between samples is told from a partition at once") {
  // Which diskstats names are whole disks is looked up in <sysfs>/block again only when the list
  // of names changes: a new disk and its partition show up right away, each as what it is.
  ScratchTree tree;
  tree.write("proc/uptime", "100.00 50.00\n");
  tree.write("proc/diskstats",
             "179 0 mmcblk0 1 0 2 0 3 0 4 0 0 5 0\n"
             "179 1 mmcblk0p1 1 0 2 0 3 0 4 0 0 5 0\n");
  tree.write("sys/block/mmcblk0/size", "1\n");
  Harness h(tree.root(), defaults());
  kiwi::diskio::DiskioSensor sensor(h.context());
  h.sample(sensor);
  CHECK(h.sink.label_values("diskio_read_bytes_total", "device") ==
        std::vector<std::string>{"mmcblk0"});
  tree.write("proc/diskstats",
             "179 0 mmcblk0 1 0 2 0 3 0 4 0 0 5 0\n"
             "179 1 mmcblk0p1 1 0 2 0 3 0 4 0 0 5 0\n"
             "8 0 sda 1 0 2 0 3 0 4 0 0 5 0\n"
             "8 1 sda1 1 0 2 0 3 0 4 0 0 5 0\n");
  tree.write("sys/block/sda/size", "1\n");
  h.sink.clear();
  h.sample(sensor);
  CHECK(h.sink.label_values("diskio_read_bytes_total", "device") ==
        std::vector<std::string>{"mmcblk0", "sda"});
}
