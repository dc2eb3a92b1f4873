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
  // After the notes on the eMMC's wear (tested below).
  CHECK_THAT(
      result.message,
      Catch::Matchers::EndsWith(
          "; counters went backwards (reset or wrapped), no rates this time for device=sda"));
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

// ---------------------------------------------------------------------------------------------
// eMMC wear: <sysfs>/block/mmcblkN/device/life_time and pre_eol_info beside the counters.

TEST_CASE("diskio: an EXT_CSD byte is hex with or without 0x, in either case") {
  using kiwi::diskio::parse_ext_csd_byte;
  CHECK(parse_ext_csd_byte("0x0b\n") == 11);
  CHECK(parse_ext_csd_byte("0x0B") == 11);
  CHECK(parse_ext_csd_byte("01\n") == 1);  // pre_eol_info as the first kernels print it
  CHECK(parse_ext_csd_byte("0xff") == 255);
  for (const char* bad : {"", "0x", "0x100", "0x0g", "-1", "1 2", "normal", "0x 1"}) {
    INFO(bad);
    CHECK_FALSE(parse_ext_csd_byte(bad));
  }
}

TEST_CASE("diskio: life_time is two bytes, type A then type B") {
  using kiwi::diskio::parse_life_time;
  CHECK(parse_life_time("0x01 0x02\n") == std::array<std::uint8_t, 2>{1, 2});
  CHECK(parse_life_time("0x0b\t0x00") == std::array<std::uint8_t, 2>{11, 0});
  for (const char* bad : {"", "0x01\n", "0x01 0x02 0x03\n", "0x01 two\n", "-\n"}) {
    INFO(bad);
    CHECK_FALSE(parse_life_time(bad));
  }
}

TEST_CASE("diskio: JEDEC's life time bands as used ratios, pre-EOL levels 1 to 3") {
  using kiwi::diskio::life_used;
  CHECK_FALSE(life_used(0x00));  // not defined by the device
  CHECK(life_used(0x01)->lower == 0.0);
  CHECK(life_used(0x01)->upper == 0.1);
  CHECK(life_used(0x02)->lower == 0.1);
  CHECK(life_used(0x02)->upper == 0.2);
  CHECK(life_used(0x07)->lower == 0.6);
  CHECK(life_used(0x07)->upper == 0.7);
  CHECK(life_used(0x0a)->lower == 0.9);
  CHECK(life_used(0x0a)->upper == 1.0);
  CHECK(life_used(0x0b)->lower == 1.0);  // past its estimated life
  CHECK(life_used(0x0b)->upper == 1.0);
  CHECK_FALSE(life_used(0x0c));  // reserved
  CHECK_FALSE(life_used(0xff));
  using kiwi::diskio::pre_eol_level;
  CHECK_FALSE(pre_eol_level(0));
  CHECK(pre_eol_level(1) == 1);
  CHECK(pre_eol_level(3) == 3);
  CHECK_FALSE(pre_eol_level(4));
}

TEST_CASE("diskio: only a card itself is read for wear, not its boot areas or partitions") {
  using kiwi::diskio::is_mmc_card;
  CHECK(is_mmc_card("mmcblk0"));
  CHECK(is_mmc_card("mmcblk12"));
  for (const char* other :
       {"mmcblk", "mmcblk0boot0", "mmcblk0p2", "mmcblk0rpmb", "sda", "nvme0n1"}) {
    INFO(other);
    CHECK_FALSE(is_mmc_card(other));
  }
}

TEST_CASE("diskio: an RK3588's eMMC reports its wear beside its bytes written, on one device") {
  Harness h(fixture("rk3588"), defaults());
  kiwi::diskio::DiskioSensor sensor(h.context());
  const auto result = h.sample(sensor);
  CHECK(result.message == "first sample: rates need two readings");
  const std::map<std::string, std::string> a{{"device", "mmcblk0"}, {"type", "A"}};
  const std::map<std::string, std::string> b{{"device", "mmcblk0"}, {"type", "B"}};
  // life_time "0x01 0x02": type A 0 to 10 % used, type B 10 to 20 %.
  CHECK(h.sink.value("diskio_emmc_life_used_lower_ratio", a) == 0.0);
  CHECK(h.sink.value("diskio_emmc_life_used_upper_ratio", a) == 0.1);
  CHECK(h.sink.value("diskio_emmc_life_used_lower_ratio", b) == 0.1);
  CHECK(h.sink.value("diskio_emmc_life_used_upper_ratio", b) == 0.2);
  CHECK(h.sink.find("diskio_emmc_life_used_upper_ratio", b)->unit == "ratio");
  CHECK(h.sink.value("diskio_emmc_pre_eol_level", {{"device", "mmcblk0"}}) == 1.0);
  // The same `device` as the counter of bytes written since boot.
  CHECK(h.sink.value("diskio_written_bytes_total", {{"device", "mmcblk0"}}) == 24681352.0 * 512);
  // Nothing for the NVMe drive and the USB stick, which have no such files.
  CHECK(h.sink.label_values("diskio_emmc_life_used_upper_ratio", "device") ==
        std::vector<std::string>{"mmcblk0", "mmcblk0"});
  CHECK(h.sink.count("diskio_emmc_pre_eol_level") == 1);
}

TEST_CASE("diskio: the boot areas show the card's wear files too, and are not reported twice") {
  Harness h(fixture("rk3588"), kiwi_sensor_test::with_strings(defaults(), "exclude", {}));
  kiwi::diskio::DiskioSensor sensor(h.context());
  h.sample(sensor);
  CHECK(h.sink.label_values("diskio_read_bytes_total", "device") ==
        std::vector<std::string>{"loop0", "loop1", "mmcblk0", "mmcblk0boot0", "mmcblk0boot1",
                                 "nvme0n1", "sda"});
  CHECK(h.sink.label_values("diskio_emmc_pre_eol_level", "device") ==
        std::vector<std::string>{"mmcblk0"});
}

TEST_CASE("diskio: wear = false reads no wear, excluding the card reads none of it either") {
  Harness off(fixture("rk3588"), kiwi_sensor_test::with_bool(defaults(), "wear", false));
  kiwi::diskio::DiskioSensor no_wear(off.context());
  off.sample(no_wear);
  CHECK(off.sink.count("diskio_written_bytes_total") == 3);
  CHECK(off.sink.count("diskio_emmc_life_used_upper_ratio") == 0);
  CHECK(off.sink.count("diskio_emmc_pre_eol_level") == 0);
  Harness nvme(fixture("rk3588"), kiwi_sensor_test::with_strings(defaults(), "include", {"nvme*"}));
  kiwi::diskio::DiskioSensor only_nvme(nvme.context());
  nvme.sample(only_nvme);
  CHECK(nvme.sink.count("diskio_emmc_pre_eol_level") == 0);
}

TEST_CASE("diskio: a Raspberry Pi's SD card has no wear files: no wear, and nothing to say") {
  Harness h(fixture("rpi4"), defaults());
  kiwi::diskio::DiskioSensor sensor(h.context());
  const auto result = h.sample(sensor);
  CHECK(result.status == kiwi::SampleStatus::ok);
  CHECK(result.message == "first sample: rates need two readings");
  CHECK(h.sink.count("diskio_written_bytes_total") == 1);
  CHECK(h.sink.count("diskio_emmc_life_used_lower_ratio") == 0);
  CHECK(h.sink.count("diskio_emmc_pre_eol_level") == 0);
}

TEST_CASE("diskio: a wear value left undefined is said so, one off JEDEC's scale is named once") {
  // awkward: life_time "0x00 0x0c" (type A undefined, type B reserved), pre_eol_info "02".
  ScratchTree tree("awkward");
  Harness h(tree.root(), defaults());
  kiwi::diskio::DiskioSensor sensor(h.context());
  const auto result = h.sample(sensor);
  CHECK(result.status == kiwi::SampleStatus::ok);
  const std::string dir = h.sysfs + "/block/mmcblk0/device";
  CHECK(result.message ==
        "mmcblk0: life_time type A 0x00, not defined by the device: left out; " + dir +
            "/life_time: type B is 0x0c, past JEDEC's scale (0x01 to 0x0b); first sample: rates "
            "need two readings");
  CHECK(h.sink.count("diskio_emmc_life_used_lower_ratio") == 0);
  CHECK(h.sink.count("diskio_emmc_life_used_upper_ratio") == 0);
  CHECK(h.sink.value("diskio_emmc_pre_eol_level", {{"device", "mmcblk0"}}) == 2.0);  // warning
  CHECK(h.sink.count("diskio_written_bytes_total") == 5);  // mmcblk0 and sda-sdd still count
  CHECK(h.log.count(kiwi::LogLevel::warn) == 1);
  tree.advance("awkward");
  h.sample(sensor);  // the same failure: not logged again
  CHECK(h.log.count(kiwi::LogLevel::warn) == 1);
}

TEST_CASE("diskio: an unreadable or garbled wear file is named, the rest of the card still read") {
  ScratchTree tree("rk3588");
  tree.make_unreadable("sys/block/mmcblk0/device/life_time");
  Harness h(tree.root(), defaults());
  kiwi::diskio::DiskioSensor sensor(h.context());
  auto result = h.sample(sensor);
  CHECK(result.status == kiwi::SampleStatus::ok);
  CHECK_THAT(result.message, Contains(h.sysfs + "/block/mmcblk0/device/life_time"));
  CHECK(h.sink.count("diskio_emmc_life_used_upper_ratio") == 0);
  CHECK(h.sink.value("diskio_emmc_pre_eol_level", {{"device", "mmcblk0"}}) == 1.0);
  CHECK(h.sink.count("diskio_written_bytes_total") == 3);

  tree.remove("sys/block/mmcblk0/device/life_time");
  tree.write("sys/block/mmcblk0/device/life_time", "0x01\n");
  tree.write("sys/block/mmcblk0/device/pre_eol_info", "normal\n");
  h.sink.clear();
  result = h.sample(sensor);
  CHECK_THAT(result.message,
             Contains("mmcblk0/device/life_time: not a value: '0x01\\x0a'") &&
                 Contains("mmcblk0/device/pre_eol_info: not a value: 'normal\\x0a'"));
  CHECK(h.sink.count("diskio_emmc_pre_eol_level") == 0);
  CHECK(h.log.count(kiwi::LogLevel::warn) == 2);  // each new failure logged once

  tree.write("sys/block/mmcblk0/device/pre_eol_info", "0x04\n");
  h.sink.clear();
  result = h.sample(sensor);
  CHECK_THAT(result.message, Contains("pre_eol_info: 0x04, past JEDEC's scale (0x01 to 0x03)"));
}

TEST_CASE("diskio: an eMMC before 5.0 defines none of it: all left out, in one note") {
  ScratchTree tree("rk3588");
  tree.write("sys/block/mmcblk0/device/life_time", "0x00 0x00\n");
  tree.write("sys/block/mmcblk0/device/pre_eol_info", "0x00\n");
  Harness h(tree.root(), defaults());
  kiwi::diskio::DiskioSensor sensor(h.context());
  const auto result = h.sample(sensor);
  CHECK(result.message ==
        "mmcblk0: life_time type A, life_time type B, pre_eol_info 0x00, not defined by the "
        "device: left out; first sample: rates need two readings");
  CHECK(h.sink.count("diskio_emmc_life_used_upper_ratio") == 0);
  CHECK(h.sink.count("diskio_emmc_pre_eol_level") == 0);
  CHECK(h.log.count(kiwi::LogLevel::warn) == 0);  // nothing is wrong
}
