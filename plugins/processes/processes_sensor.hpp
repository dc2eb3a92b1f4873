// The processes sensor: how many processes are in each state, and the top N by CPU and by
// resident memory with their pid and command name, in a bounded set of series. See README.md.
#pragma once

#include <cstdint>
#include <kiwi/attributes.hpp>
#include <kiwi/io.hpp>
#include <kiwi/sensor.hpp>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

namespace kiwi::processes {

// The one place the options and their defaults are declared (plugin.cpp registers it; the host
// fills in defaults; tests build Options from it).
inline constexpr kiwi::OptionSpec kOptions[] = {
    {"top", kiwi::OptionType::integer, "5",
     "how many processes each list ranks (by CPU, by resident memory), 1 to 20", true, 1, 20},
};

inline constexpr kiwi::MetricSpec kState = kiwi::gauge(
    "processes_state", kiwi::Unit::count, "state",
    "processes in each state (running, sleeping, disk_sleep, stopped, zombie, idle, parked, dead, "
    "other), kernel threads included (field 3 of <procfs>/[pid]/stat)");
inline constexpr kiwi::MetricSpec kPids =
    kiwi::gauge("processes_pids", kiwi::Unit::count, "",
                "processes, kernel threads included (the numbered directories of <procfs>)");
inline constexpr kiwi::MetricSpec kThreads =
    kiwi::gauge("processes_threads", kiwi::Unit::count, "",
                "threads of all processes together (num_threads of <procfs>/[pid]/stat)");
inline constexpr kiwi::MetricSpec kTopPid = kiwi::gauge(
    "processes_top_pid", kiwi::Unit::none, "by,rank,command",
    "the pid of the process at this rank (1 is the highest) of the list by cpu or by memory, "
    "labelled with its command name (comm, at most 15 bytes)");
inline constexpr kiwi::MetricSpec kTopCpu = kiwi::gauge(
    "processes_top_cpu_ratio", kiwi::Unit::ratio, "by,rank",
    "the share of all cores' time the process at this rank used since the last sample (utime + "
    "stime of <procfs>/[pid]/stat over the ticks of <procfs>/stat)");
inline constexpr kiwi::MetricSpec kTopResident = kiwi::gauge(
    "processes_top_resident_bytes", kiwi::Unit::bytes, "by,rank",
    "resident memory of the process at this rank (rss of <procfs>/[pid]/stat times the page size)");

inline constexpr kiwi::MetricSpec kMetrics[] = {kState,  kPids,   kThreads,
                                                kTopPid, kTopCpu, kTopResident};

// The most distinct (by, rank, command) series of processes_top_pid one sensor names; past it a
// command new at its rank is reported as kUnnamed (see README "Why the series stay bounded").
inline constexpr std::size_t kMaxNamedSeries = 1000;
inline constexpr std::string_view kUnnamed = "(other)";

class ProcessesSensor final : public kiwi::Sensor {
 public:
  // Copies the procfs root and the options; reads nothing.
  explicit ProcessesSensor(const kiwi::SensorContext& ctx);

  kiwi::SampleResult sample(kiwi::MetricSink& sink) override;

 private:
  // One process of a sample; its command name is in names_ at [name_at, name_at + name_size).
  struct Process {
    std::int64_t pid = 0;
    std::uint64_t start_ticks = 0;
    std::uint64_t cpu_ticks = 0;
    std::uint64_t rss_pages = 0;
    std::uint32_t name_at = 0, name_size = 0;
    bool read = false;  // false: listed but its stat could not be read or parsed
    std::uint64_t cpu_delta = 0;
    bool cpu_known = false;  // cpu_delta holds the ticks it used since the last sample
  };
  // Lists <procfs> and reads every process's stat into processes_ (sorted by pid), counting the
  // states and threads; failures are named in failed_. false when <procfs> cannot be listed.
  bool read_processes();
  // Sets each process's cpu_delta from the previous sample's reading of the same process.
  void cpu_deltas();
  // Emits one ranked list: `by` is "cpu" or "memory".
  void emit_top(kiwi::MetricSink& sink, std::string_view by, const std::vector<std::size_t>& top,
                std::uint64_t total_delta);
  std::string_view name_of(const Process& p) const {
    return {names_.data() + p.name_at, p.name_size};
  }

  std::string procfs_;
  kiwi::KeptFile stat_;  // <procfs>/stat, for the ticks of all cores
  std::size_t top_;
  double page_size_;  // bytes (sysconf _SC_PAGESIZE: 4 KiB, 16 KiB on a Pi 5)
  kiwi::Logger& log_;

  std::vector<Process> processes_, previous_;  // this sample's and the last one's, by pid
  std::string names_;                          // command names of processes_, back to back
  std::uint64_t states_[16] = {};              // processes per kStates row
  std::uint64_t threads_ = 0;
  std::vector<std::string> failed_;  // this sample: the first stat files that failed
  std::size_t failed_count_ = 0;
  std::optional<std::uint64_t> previous_total_;  // the last sample's ticks of <procfs>/stat
  bool first_ = true;
  std::unordered_set<std::string> named_;  // by, rank and command of each named series so far
  bool unnamed_ = false;                   // a command has been reported as kUnnamed
  std::string text_;                       // <procfs>/stat's text, its storage reused
  kiwi::AttributeReads problems_;          // what could not be read, logged when it changes
};

}  // namespace kiwi::processes
