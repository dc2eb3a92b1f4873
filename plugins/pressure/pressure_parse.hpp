// Pure functions for the pressure sensor: the text of <procfs>/pressure/{cpu,memory,io},
// <procfs>/vmstat and <procfs>/stat to numbers. No file I/O, so each is tested on fixture text.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kiwi::pressure {

// One line of a PSI file (Documentation/accounting/psi.rst):
//   some avg10=0.12 avg60=0.05 avg300=0.01 total=123456
// The averages, percentages of wall time over 10, 60 and 300 s with two decimals, are kept as
// ratios (12.50 is 0.125, the division of two integers: the double nearest the true value);
// total is microseconds.
struct PsiLine {
  double avg10 = 0, avg60 = 0, avg300 = 0;
  std::uint64_t total_us = 0;
};

// A PSI file: "some" (at least one task stalled) and "full" (all non-idle tasks stalled at once;
// the cpu file has it since Linux 5.13, at the system level always zero). Lines of another kind
// are skipped (a later kernel may add some); a "some" or "full" line without its four fields, or
// with one that is not a number, throws std::invalid_argument naming the line.
struct Psi {
  std::optional<PsiLine> some, full;
};
Psi parse_psi(std::string_view text);

// The /proc/vmstat counters the sensor keeps; nullopt when the kernel has no such line (oom_kill
// came in Linux 4.13; pswpin and pswpout need CONFIG_SWAP). A line that is not `name value` is
// skipped; a kept counter whose value is not one throws std::invalid_argument.
struct VmEvents {
  std::optional<std::uint64_t> oom_kill, pgmajfault, pswpin, pswpout;
};
VmEvents parse_vmstat(std::string_view text);

// `btime` of /proc/stat: when the system booted, unix seconds; nullopt without the line.
std::optional<std::uint64_t> parse_btime(std::string_view stat_text);

}  // namespace kiwi::pressure
