#include "cpu_parse.hpp"

#include <algorithm>
#include <charconv>
#include <kiwi/io.hpp>
#include <kiwi/text.hpp>
#include <stdexcept>
#include <string>

namespace kiwi::cpu {
namespace {

double clamp01(double v) {
  return std::clamp(v, 0.0, 1.0);
}

}  // namespace

std::uint64_t CpuTimes::total() const {
  std::uint64_t sum = 0;
  for (auto t : ticks) sum += t;
  return sum;
}

ProcStat parse_proc_stat(std::string_view text) {
  ProcStat out;
  for (std::string_view line : Lines(text)) {
    Fields fields(line);
    std::string_view key = fields.next();
    if (!key.starts_with("cpu")) continue;
    std::optional<int> core;  // nullopt for the aggregate "cpu" line
    if (key.size() > 3) {
      core = to_number<int>(key.substr(3));
      if (!core) continue;  // not a cpu line after all ("cpufoo"): not ours to judge
    }
    CpuTimes times;
    std::size_t count = 0;
    for (std::string_view field : fields) {
      auto value = to_number<std::uint64_t>(field);
      if (!value)
        throw std::invalid_argument("/proc/stat line " + quote_excerpt(line) + ": field " +
                                    quote_excerpt(field) + " is not a counter");
      if (count < times.ticks.size()) times.ticks[count] = *value;
      ++count;
    }
    if (count < 4)
      throw std::invalid_argument("/proc/stat line " + quote_excerpt(line) +
                                  ": expected at least 4 counters (user nice system idle)");
    if (core)
      out.cores[*core] = times;
    else
      out.all = times;
  }
  return out;
}

std::optional<CpuRatios> compute_ratios(const CpuTimes& before, const CpuTimes& after) {
  CpuTimes delta;
  for (std::size_t i = 0; i < delta.ticks.size(); ++i) {
    if (after.ticks[i] < before.ticks[i]) return std::nullopt;
    delta.ticks[i] = after.ticks[i] - before.ticks[i];
  }
  const double total = static_cast<double>(delta.total());
  if (total <= 0) return std::nullopt;
  CpuRatios r;
  for (std::size_t i = 0; i < delta.ticks.size(); ++i)
    r.modes[i] = clamp01(static_cast<double>(delta.ticks[i]) / total);
  const double idle = static_cast<double>(delta.ticks[kIdle] + delta.ticks[kIowait]);
  // One division, so 15 busy ticks of 100 read 0.15 and not 1 - 0.85 = 0.15000000000000002.
  r.usage = clamp01((total - idle) / total);
  return r;
}

std::optional<LoadAvg> parse_loadavg(std::string_view text) {
  std::string_view rest = text;
  auto l1 = to_number<double>(next_field(rest));
  auto l5 = to_number<double>(next_field(rest));
  auto l15 = to_number<double>(next_field(rest));
  if (!l1 || !l5 || !l15) return std::nullopt;
  return LoadAvg{*l1, *l5, *l15};
}

std::optional<double> parse_khz_as_hertz(std::string_view text) {
  std::string_view rest = text;
  auto khz = to_number<std::uint64_t>(next_field(rest));
  if (!khz) return std::nullopt;
  return static_cast<double>(*khz) * 1000.0;
}

}  // namespace kiwi::cpu
