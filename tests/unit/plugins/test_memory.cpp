// memory plugin: /proc/meminfo parsing and derived values, and the sensor on fixture boards.
#include <catch2/catch.hpp>

#include "memory_parse.hpp"
#include "memory_sensor.hpp"
#include "sensor_test_util.hpp"

using Catch::Matchers::Contains;
using kiwi_sensor_test::fixture;
using kiwi_sensor_test::Harness;
using kiwi_sensor_test::read_text;
using kiwi_sensor_test::ScratchTree;

namespace {

// The vm fixture's meminfo as a kernel before 3.14 would write it: no MemAvailable line.
std::string meminfo_without_available() {
  std::string text = read_text(fixture("vm/proc/meminfo"));
  const auto start = text.find("MemAvailable:");
  return text.erase(start, text.find('\n', start) + 1 - start);
}

}  // namespace

TEST_CASE("memory: meminfo kB values become bytes, unitless counts stay counts") {
  const auto info = kiwi::memory::parse_meminfo(read_text(fixture("rk3588/proc/meminfo")));
  CHECK(info.at("MemTotal") == 8300695552u);  // 8106148 kB
  CHECK(info.at("MemAvailable") == 7078236160u);
  CHECK(info.at("SwapTotal") == 0u);
  CHECK(info.at("HugePages_Total") == 0u);
  CHECK(info.at("Active(anon)") == 610336u * 1024);
  CHECK(info.count("MemTotal:") == 0);
}

TEST_CASE("memory: lines that are damaged or in an unknown unit are left out, not misread") {
  const auto info = kiwi::memory::parse_meminfo("MemTotal: 1000 kB\nBroken line\nOdd: 5 MB\n");
  CHECK(info.size() == 1);
  CHECK(info.at("MemTotal") == 1024000u);
}

TEST_CASE("memory: an 8 GB RK3588 without swap gives exact totals and used = total - available") {
  const auto s = kiwi::memory::compute_memory(
      kiwi::memory::parse_meminfo(read_text(fixture("rk3588/proc/meminfo"))));
  CHECK(s.total_bytes == 8300695552.0);
  CHECK(s.available_bytes == 7078236160.0);
  CHECK(s.used_bytes == 1222459392.0);
  CHECK(*s.used_ratio == Approx(1193808.0 / 8106148.0));
  CHECK(s.cached_bytes == 1754054656.0);
  CHECK(s.buffers_bytes == 100569088.0);
  CHECK(s.swap_total_bytes == 0.0);
  CHECK(s.swap_used_bytes == 0.0);
  CHECK_FALSE(s.available_estimated);
}

TEST_CASE("memory: without MemAvailable, available is estimated as the kernel computes it") {
  // vm: MemFree 231456, Active(file) 417792 + Inactive(file) 648192 = 1065984, SReclaimable 98304
  // kB; min_free_kbytes 67584 gives a low watermark of 84480 kB. The kernel keeps half of the page
  // cache and slab, at most the watermark: 231456 - 84480 + 1065984 - 84480 + 98304 - 49152.
  const auto s =
      kiwi::memory::compute_memory(kiwi::memory::parse_meminfo(meminfo_without_available()), 67584);
  CHECK(s.available_estimated);
  CHECK(s.available_bytes == 1177632.0 * 1024);
  CHECK(s.used_bytes == (2014612.0 - 1177632.0) * 1024);
  // The old `free` formula (MemFree + Buffers + Cached = 1307928 kB) would overstate it by 11%;
  // the kernel's own MemAvailable on this machine was 1312004 kB, so the estimate errs low.
  CHECK(*s.available_bytes < 1307928.0 * 1024);
}

TEST_CASE("memory: without min_free_kbytes the estimate takes the low watermark as 0") {
  const auto s =
      kiwi::memory::compute_memory(kiwi::memory::parse_meminfo(meminfo_without_available()));
  CHECK(s.available_bytes == (231456.0 + 1065984.0 - 0 + 98304.0) * 1024);
}

TEST_CASE("memory: an estimate below zero reads 0, never a negative amount") {
  const auto s = kiwi::memory::compute_memory(
      kiwi::memory::parse_meminfo("MemTotal: 1000 kB\nMemFree: 10 kB\n"), 65536);
  CHECK(s.available_bytes == 0.0);
  CHECK(s.used_ratio == 1.0);
}

TEST_CASE("memory: meminfo without MemTotal is refused") {
  CHECK_THROWS_WITH(kiwi::memory::compute_memory(kiwi::memory::parse_meminfo("MemFree: 5 kB\n")),
                    Contains("MemTotal"));
}

TEST_CASE("memory: the sensor on an RK3588 emits all 8 metrics in base units") {
  Harness h(fixture("rk3588"));
  kiwi::memory::MemorySensor sensor(h.context());
  const auto result = sensor.sample(h.sink);
  CHECK(result.status == kiwi::SampleStatus::ok);
  CHECK(result.message.empty());
  std::vector<std::string> names;
  for (const auto& s : h.sink.samples) names.push_back(s.name);
  CHECK(names == std::vector<std::string>{"memory_total_bytes", "memory_available_bytes",
                                          "memory_used_bytes", "memory_used_ratio",
                                          "memory_cached_bytes", "memory_buffers_bytes",
                                          "memory_swap_total_bytes", "memory_swap_used_bytes"});
  CHECK(h.sink.value("memory_total_bytes") == 8300695552.0);
  CHECK(h.sink.find("memory_total_bytes")->unit == "bytes");
  CHECK(h.sink.find("memory_used_ratio")->unit == "ratio");
  CHECK(h.sink.value("memory_swap_total_bytes") == 0.0);
}

TEST_CASE("memory: a Raspberry Pi 4 swap file shows up as swap total and used") {
  Harness h(fixture("rpi4"));
  kiwi::memory::MemorySensor sensor(h.context());
  sensor.sample(h.sink);
  CHECK(h.sink.value("memory_swap_total_bytes") == 104853504.0);  // 102396 kB
  CHECK(h.sink.value("memory_swap_used_bytes") == 11534336.0);    // 102396 - 91132 kB
}

TEST_CASE("memory: an old kernel without MemAvailable gets an estimate and a note, logged once") {
  ScratchTree tree;
  tree.write("proc/meminfo", meminfo_without_available());
  tree.write("proc/sys/vm/min_free_kbytes", "67584\n");
  Harness h(tree.root());
  kiwi::memory::MemorySensor sensor(h.context());
  const auto result = sensor.sample(h.sink);
  CHECK(result.status == kiwi::SampleStatus::ok);
  CHECK_THAT(result.message, Contains("MemAvailable") && Contains("estimated"));
  CHECK(h.sink.value("memory_available_bytes") == 1177632.0 * 1024);
  sensor.sample(h.sink);
  CHECK(h.log.count(kiwi::LogLevel::info) == 1);
}

TEST_CASE("memory: a missing meminfo is an error naming the path") {
  ScratchTree tree;
  Harness h(tree.root());
  kiwi::memory::MemorySensor sensor(h.context());
  CHECK_THROWS_WITH(sensor.sample(h.sink), Contains("proc/meminfo: not found"));
}

TEST_CASE("memory: a 3.10 kernel's meminfo gets the kernel's estimate from min_free_kbytes") {
  // tests/fixtures/awkward: no MemAvailable; min_free_kbytes 3489 gives a low watermark of 4361.
  // 312456 - 4361 + (477778 + 455564) - 4361 + 54321 - 4361 = 1287036 kB.
  Harness h(fixture("awkward"));
  kiwi::memory::MemorySensor sensor(h.context());
  const auto result = sensor.sample(h.sink);
  CHECK_THAT(result.message, Contains("MemAvailable missing"));
  CHECK(h.sink.value("memory_available_bytes") == 1287036.0 * 1024);
  CHECK(h.sink.value("memory_total_bytes") == 2045116.0 * 1024);
}
