#include "processes_sensor.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <system_error>

#include "processes_parse.hpp"

namespace kiwi::processes {

namespace {

// A stat line is about 52 numbers and a command name of at most 64 bytes: under 1.3 KiB. A file
// that fills this buffer is not one.
constexpr std::size_t kStatMax = 4096;

std::optional<std::int64_t> pid_of(const char* name) {
  const std::size_t n = std::strlen(name);
  if (n == 0 || n > 10 || name[0] == '0') return std::nullopt;
  return kiwi::to_number<std::int64_t>(std::string_view(name, n));
}

std::string errno_text(const std::string& path, int err) {
  return path + ": " + std::generic_category().message(err);
}

}  // namespace

ProcessesSensor::ProcessesSensor(const kiwi::SensorContext& ctx)
    : procfs_(ctx.procfs),
      stat_(kiwi::join_path(ctx.procfs, "stat"), kiwi::kTableReadCap),
      top_(static_cast<std::size_t>(ctx.options.get_int("top"))),
      page_size_(static_cast<double>(::sysconf(_SC_PAGESIZE) > 0 ? ::sysconf(_SC_PAGESIZE) : 4096)),
      log_(ctx.log) {}

bool ProcessesSensor::read_processes() {
  processes_.clear();
  names_.clear();
  failed_.clear();
  failed_count_ = 0;
  threads_ = 0;
  std::fill(std::begin(states_), std::end(states_), 0);
  auto fail = [&](std::string why) {
    if (failed_.size() < 3) failed_.push_back(std::move(why));
    ++failed_count_;
  };
  const std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(procfs_.c_str()), ::closedir);
  if (!dir) {
    if (errno == ENOENT || errno == ENOTDIR) return false;
    throw std::system_error(errno, std::generic_category(), procfs_);
  }
  // Each process's stat is opened relative to the directory (no walk from / per file), read with
  // one read() (procfs renders the whole line on the first read; a regular file gives all of a
  // small file) and closed: three system calls. Not kept open between samples as KeptFile does:
  // one descriptor per process would eat into the agent's 1,024 (docs/benchmarks.md has the
  // cost: about 3.5 us a process).
  const int dir_fd = ::dirfd(dir.get());
  char path[16];  // "<pid>/stat"
  char text[kStatMax];
  errno = 0;
  while (const dirent* entry = ::readdir(dir.get())) {
    const auto pid = pid_of(entry->d_name);
    if (!pid) continue;                                     // self, thread-self, sys, meminfo, ...
    const std::size_t length = std::strlen(entry->d_name);  // 1 to 10 digits
    std::memcpy(path, entry->d_name, length);
    std::memcpy(path + length, "/stat", sizeof "/stat");
    Process p;
    p.pid = *pid;
    const int fd = ::openat(dir_fd, path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    ssize_t n = -1;
    int err = errno;
    if (fd >= 0) {
      do n = ::read(fd, text, sizeof text);
      while (n < 0 && errno == EINTR);
      err = errno;
      ::close(fd);
    }
    // A process that ended since the listing (its directory gone, or ESRCH from a read) is not a
    // failure: between two samples hundreds may come and go.
    if (n == 0 || (n < 0 && (err == ENOENT || err == ESRCH))) {
      errno = 0;
      continue;
    }
    const std::string_view line(text, n > 0 ? static_cast<std::size_t>(n) : 0);
    try {
      if (n < 0) throw std::runtime_error(std::generic_category().message(err));
      if (line.size() == sizeof text)
        throw std::runtime_error("longer than 4 KiB: not a stat line");
      const PidStat s = parse_pid_stat(line);
      p.start_ticks = s.start_ticks;
      p.cpu_ticks = s.cpu_ticks;
      p.rss_pages = s.rss_pages;
      p.name_at = static_cast<std::uint32_t>(names_.size());
      p.name_size = static_cast<std::uint32_t>(s.comm.size());
      names_.append(s.comm);
      p.read = true;
      ++states_[state_index(s.state)];
      threads_ += s.threads;
    } catch (const std::exception& e) {
      fail(kiwi::join_path(procfs_, path) + ": " + e.what());
    }
    processes_.push_back(p);
    errno = 0;
  }
  if (errno != 0) fail(errno_text(procfs_, errno));  // the listing itself failed part way
  std::sort(processes_.begin(), processes_.end(),
            [](const Process& a, const Process& b) { return a.pid < b.pid; });
  return true;
}

void ProcessesSensor::cpu_deltas() {
  auto before = previous_.begin();
  for (Process& p : processes_) {
    if (!p.read) continue;
    while (before != previous_.end() && before->pid < p.pid) ++before;
    const bool listed = before != previous_.end() && before->pid == p.pid;
    if (listed && !before->read) continue;  // its stat failed last time: no delta yet
    if (!listed || before->start_ticks != p.start_ticks) {
      // Not there at the last sample (the listing had every process), or a new process under a
      // reused pid: all the time it used is in this interval.
      p.cpu_delta = p.cpu_ticks;
      p.cpu_known = true;
    } else if (p.cpu_ticks >= before->cpu_ticks) {
      p.cpu_delta = p.cpu_ticks - before->cpu_ticks;
      p.cpu_known = true;
    }
  }
}

void ProcessesSensor::emit_top(kiwi::MetricSink& sink, std::string_view by,
                               const std::vector<std::size_t>& top, std::uint64_t total_delta) {
  for (std::size_t r = 0; r < top.size(); ++r) {
    const Process& p = processes_[top[r]];
    const std::string rank = std::to_string(r + 1);
    std::string_view command = name_of(p);
    std::string key;
    key.append(by).append(1, '\0').append(rank).append(1, '\0').append(command);
    if (!named_.contains(key)) {
      if (named_.size() < kMaxNamedSeries) {
        named_.insert(std::move(key));
      } else {
        command = kUnnamed;
        unnamed_ = true;
      }
    }
    sink.emit(kTopPid, {by, rank, command}, static_cast<double>(p.pid));
    if (total_delta > 0 && p.cpu_known)
      sink.emit(kTopCpu, {by, rank},
                std::min(1.0, static_cast<double>(p.cpu_delta) / static_cast<double>(total_delta)));
    sink.emit(kTopResident, {by, rank}, static_cast<double>(p.rss_pages) * page_size_);
  }
}

kiwi::SampleResult ProcessesSensor::sample(kiwi::MetricSink& sink) {
  if (!read_processes())
    return kiwi::SampleResult::no_data("no processes: " + procfs_ + " is missing");
  std::size_t readable = 0;
  for (const auto& p : processes_) readable += p.read;
  for (auto& failure : failed_) problems_.note(std::move(failure));
  if (failed_count_ > failed_.size())
    problems_.note(std::to_string(failed_count_ - failed_.size()) + " more stat files failed");
  if (readable == 0) {
    if (failed_count_ > 0) throw std::runtime_error(problems_.finish(log_));
    return kiwi::SampleResult::no_data("no processes: " + procfs_ +
                                       " has no numbered directories (not a procfs?)");
  }
  // Under hidepid (systemd's ProtectProc=invisible) only the processes of the agent's own user
  // are listed, and never process 1.
  if (processes_.front().pid != 1)
    problems_.note("process 1 is not visible: " + procfs_ +
                   " shows only some processes (mounted with hidepid, as systemd's "
                   "ProtectProc=invisible does), and only those are counted and ranked; "
                   "ProtectProc=default in a drop-in for the unit shows every process");
  // The ticks of all cores, the measure of each process's share.
  std::optional<std::uint64_t> total;
  try {
    if (!stat_.read_into(text_))
      problems_.note(stat_.path() + ": not found: no CPU shares");
    else if (!(total =
                   kiwi::parse_file(stat_.path(), [&] { return parse_cpu_total_ticks(text_); })))
      problems_.note(stat_.path() + ": no aggregate 'cpu' line: no CPU shares");
  } catch (const std::exception& e) {
    problems_.note(std::string(e.what()) + ": no CPU shares");
  }
  std::vector<std::string> notes;

  for (std::size_t i = 0; i < std::size(kStates); ++i)
    sink.emit(kState, {kStates[i].label}, static_cast<double>(states_[i]));
  sink.emit(kPids, static_cast<double>(readable));
  sink.emit(kThreads, static_cast<double>(threads_));

  std::uint64_t total_delta = 0;
  if (first_) {
    notes.push_back(
        "first sample: CPU shares need two readings, the top by cpu comes with the next");
  } else if (total && previous_total_ && *total > *previous_total_) {
    total_delta = *total - *previous_total_;
    cpu_deltas();
  } else if (total && previous_total_) {
    notes.push_back(stat_.path() +
                    ": the CPU ticks went backwards or did not advance "
                    "(suspend/resume?): no CPU shares this sample");
  } else if (total) {
    notes.push_back("CPU shares need two readings of " + stat_.path() +
                    ", the top by cpu comes with the next");
  }

  std::vector<std::size_t> by_cpu, by_memory;
  for (std::size_t i = 0; i < processes_.size(); ++i) {
    const Process& p = processes_[i];
    if (p.read && p.cpu_known && p.cpu_delta > 0 && total_delta > 0) by_cpu.push_back(i);
    if (p.read && p.rss_pages > 0) by_memory.push_back(i);
  }
  auto keep_top = [&](std::vector<std::size_t>& list, auto higher) {
    const std::size_t n = std::min(top_, list.size());
    std::partial_sort(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(n), list.end(),
                      [&](std::size_t a, std::size_t b) {
                        const Process &x = processes_[a], &y = processes_[b];
                        return higher(x) != higher(y) ? higher(x) > higher(y) : x.pid < y.pid;
                      });
    list.resize(n);
  };
  keep_top(by_cpu, [](const Process& p) { return p.cpu_delta; });
  keep_top(by_memory, [](const Process& p) { return p.rss_pages; });
  unnamed_ = false;
  emit_top(sink, "cpu", by_cpu, total_delta);
  emit_top(sink, "memory", by_memory, total_delta);
  if (unnamed_)
    notes.push_back("commands new at their rank are shown as " + std::string(kUnnamed) + ": " +
                    std::to_string(kMaxNamedSeries) +
                    " series of processes_top_pid have been named since the agent started");

  std::swap(previous_, processes_);
  previous_total_ = total;
  first_ = false;

  // Problems are logged when they start or change, not every sample; the notes are not logged.
  std::string message = problems_.finish(log_);
  for (const auto& note : notes) message += (message.empty() ? "" : "; ") + note;
  return kiwi::SampleResult::ok(std::move(message));
}

}  // namespace kiwi::processes
