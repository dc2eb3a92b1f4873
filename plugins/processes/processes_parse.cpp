#include "processes_parse.hpp"

#include <kiwi/io.hpp>
#include <kiwi/text.hpp>
#include <stdexcept>
#include <string>

namespace kiwi::processes {

namespace {

std::invalid_argument bad_stat(std::string_view text, std::string_view why) {
  return std::invalid_argument(std::string(why) + ": " + kiwi::quote_excerpt(kiwi::trim(text)));
}

}  // namespace

PidStat parse_pid_stat(std::string_view text) {
  const std::size_t open = text.find('('), close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open)
    throw bad_stat(text, "not a stat line, no (command)");
  PidStat out;
  const auto pid = kiwi::to_number<std::int64_t>(kiwi::trim(text.substr(0, open)));
  if (!pid || *pid <= 0) throw bad_stat(text, "no pid before the (command)");
  out.pid = *pid;
  out.comm = text.substr(open + 1, close - open - 1);
  // Fields 3 (state) to 24 (rss), after the command; what follows rss is not read.
  std::string_view rest = text.substr(close + 1);
  const std::string_view state = kiwi::next_field(rest);
  if (state.size() != 1) throw bad_stat(text, "no one-letter state after the (command)");
  out.state = state[0];
  std::uint64_t utime = 0;
  for (int field = 4; field <= 24; ++field) {
    const std::string_view f = kiwi::next_field(rest);
    if (f.empty()) throw bad_stat(text, "fewer than 24 fields");
    std::uint64_t* keep = field == 14   ? &utime
                          : field == 15 ? &out.cpu_ticks
                          : field == 20 ? &out.threads
                          : field == 22 ? &out.start_ticks
                          : field == 24 ? &out.rss_pages
                                        : nullptr;
    if (!keep) continue;  // priority, nice, cutime... are signed: not read
    const auto v = kiwi::to_number<std::uint64_t>(f);
    if (!v) throw bad_stat(text, "field " + std::to_string(field) + " is not a number");
    *keep = *v;
  }
  out.cpu_ticks += utime;
  return out;
}

std::optional<std::uint64_t> parse_cpu_total_ticks(std::string_view stat_text) {
  for (const std::string_view line : kiwi::Lines(stat_text)) {
    std::string_view rest = line;
    if (kiwi::next_field(rest) != "cpu") continue;
    std::uint64_t ticks[8] = {};
    if (kiwi::read_counters(rest, ticks, line) < 4)
      throw std::invalid_argument("line " + kiwi::quote_excerpt(line) +
                                  ": expected at least 4 counters (user nice system idle)");
    std::uint64_t total = 0;
    for (const std::uint64_t t : ticks) total += t;
    return total;
  }
  return std::nullopt;
}

std::size_t state_index(char letter) {
  for (std::size_t i = 0; i < kOtherState; ++i)
    if (kStates[i].letters.find(letter) != std::string_view::npos) return i;
  return kOtherState;
}

}  // namespace kiwi::processes
