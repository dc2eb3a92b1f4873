// Pure functions for the memory sensor: /proc/meminfo text to byte counts to metric values. No
// file I/O here, so every function is tested on fixture text (tests/unit/sensors/).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace kiwi::memory {

// /proc/meminfo keys ("MemTotal") to values in bytes ("kB" is KiB, as the kernel means it); keys
// without a unit (HugePages_Total) keep their plain count. Malformed lines are skipped: the file
// gains fields with kernel versions and we only need a few.
std::map<std::string, std::uint64_t, std::less<>> parse_meminfo(std::string_view text);

// The values the memory sensor emits, in bytes except used_ratio. nullopt: the kernel does not
// provide the source line, so the metric is left out rather than reported as 0.
struct MemoryStats {
  std::optional<double> total_bytes;
  std::optional<double> available_bytes;
  std::optional<double> used_bytes;
  std::optional<double> used_ratio;
  std::optional<double> cached_bytes;
  std::optional<double> buffers_bytes;
  std::optional<double> swap_total_bytes;
  std::optional<double> swap_used_bytes;
  bool available_estimated = false;  // MemAvailable missing (kernel < 3.14): see compute_memory
};

// Derives the metric values. Throws std::invalid_argument if MemTotal is missing, because nothing
// meaningful can be said without it.
//
// Without MemAvailable (kernels before 3.14) available memory is estimated as the kernel's
// si_mem_available() of 3.14 computes it, and as procps' `free` does on such kernels: MemFree minus
// the low watermark, plus the file page cache (Active(file) + Inactive(file)) and SReclaimable,
// each minus what the kernel keeps of it (half, at most the low watermark). The low watermark is
// min_free_kbytes * 5 / 4 (from <procfs>/sys/vm/min_free_kbytes); nullopt counts it as 0.
MemoryStats compute_memory(const std::map<std::string, std::uint64_t, std::less<>>& meminfo,
                           std::optional<std::uint64_t> min_free_kbytes = std::nullopt);

}  // namespace kiwi::memory
