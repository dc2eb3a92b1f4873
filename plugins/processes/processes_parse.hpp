// Pure functions for the processes sensor: the text of <procfs>/[pid]/stat and the aggregate cpu
// line of <procfs>/stat. No file I/O, so each is tested on fixture text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kiwi::processes {

// What the sensor keeps of one <procfs>/[pid]/stat (proc(5); the kernel's do_task_stat):
//   1234 (tmux: server) S 1 1234 1234 0 -1 4194368 ... utime stime ... num_threads 0 starttime
//   vsize rss ...
// The command name is between the first '(' and the LAST ')': it may itself hold spaces and
// parentheses ("(sd-pam)" is "((sd-pam))" there), and a process may name itself anything.
struct PidStat {
  std::int64_t pid = 0;
  std::string_view comm;          // a view into the text; at most 15 bytes, a kworker's up to 63
  char state = '?';               // field 3: R, S, D, T, t, Z, I, X, P, ...
  std::uint64_t cpu_ticks = 0;    // utime + stime (fields 14, 15): all its threads, USER_HZ ticks
  std::uint64_t threads = 0;      // num_threads (field 20)
  std::uint64_t start_ticks = 0;  // starttime (field 22), ticks after boot: tells a reused pid
  std::uint64_t rss_pages = 0;    // rss (field 24): resident pages (0 for a kernel thread)
};

// Throws std::invalid_argument naming what is wrong (no "(comm)", fewer than 24 fields, a field
// that is not a number) and quoting the text.
PidStat parse_pid_stat(std::string_view text);

// The total of the aggregate "cpu" line of /proc/stat: user, nice, system, idle, iowait, irq,
// softirq and steal ticks of all cores (guest and guest_nice are inside user and nice already), as
// the cpu sensor sums them. nullopt without the line; throws std::invalid_argument when it has
// fewer than 4 counters or one that is not a counter.
std::optional<std::uint64_t> parse_cpu_total_ticks(std::string_view stat_text);

// The `state` label of each process state, in the order the sensor emits them; every one is
// emitted each sample (0 when no process is in it), so the set of series is fixed.
struct State {
  std::string_view label;
  std::string_view letters;  // the state letters it counts (the kernel's task_state_array)
};
inline constexpr State kStates[] = {
    {"running", "R"},     // running or runnable
    {"sleeping", "S"},    // interruptible sleep: waiting for an event
    {"disk_sleep", "D"},  // uninterruptible, usually I/O (idle kernel threads too before 4.14)
    {"stopped", "Tt"},    // stopped by a signal (T) or by a tracer (t)
    {"zombie", "Z"},      // exited, not yet reaped by its parent
    {"idle", "I"},        // an idle kernel thread (Linux 4.14 and later)
    {"parked", "P"},      // a parked kernel thread (a CPU going offline)
    {"dead", "Xx"},       // being removed
    {"other", ""},        // any other letter (W, K of old kernels; one a later kernel adds)
};
inline constexpr std::size_t kOtherState = std::size(kStates) - 1;

// The index in kStates of a state letter.
std::size_t state_index(char letter);

}  // namespace kiwi::processes
