// The cpu sensor's parsers: /proc/stat (two readings, split at a NUL byte, and the ratios between
// them), /proc/loadavg and a cpufreq file. A malformed file throws std::invalid_argument (the
// sensor reports it) or gives nullopt; nothing else.
#include <cmath>
#include <stdexcept>

#include "cpu_parse.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto [a, b] = kiwi_fuzz::halves(kiwi_fuzz::text(data, size));
  try {
    const kiwi::cpu::ProcStat before = kiwi::cpu::parse_proc_stat(a);
    const kiwi::cpu::ProcStat after = kiwi::cpu::parse_proc_stat(b);
    if (before.all && after.all) (void)kiwi::cpu::compute_ratios(*before.all, *after.all);
    for (auto& [n, t] : after.cores)
      if (auto it = before.cores.find(n); it != before.cores.end())
        (void)kiwi::cpu::compute_ratios(it->second, t);
  } catch (const std::invalid_argument&) {
  }
  if (auto l = kiwi::cpu::parse_loadavg(a)) (void)l;
  if (auto hz = kiwi::cpu::parse_khz_as_hertz(a)) KIWI_FUZZ_CHECK(std::isfinite(*hz));
  return 0;
}
