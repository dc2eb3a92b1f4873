// kiwi-agent plugin SDK: running a program as a child process (header-only).
//
// The exec sensor and the cgi handler both run a user's program, so how that is done lives here,
// once: no shell and no PATH search, a scrubbed environment, stdin fed from memory, stdout captured
// up to a cap, the last lines of stderr kept for the error message, and a deadline after which the
// program's whole process group is killed. run() blocks the calling thread and keeps no state
// outside the call, so it is thread-safe and reentrant (the collector calls it from a sensor's own
// thread, the HTTP server from several workers at once).
//
// How a run ends (the rule that keeps it from hanging past its deadline):
//   - The child is spawned with posix_spawn (safe in a multi-threaded process: no fork of the
//     agent's heap and locks) as the leader of a new process group, with default signal
//     dispositions and an empty signal mask (the agent blocks SIGHUP/SIGTERM in its threads and
//     ignores SIGPIPE; the child must not inherit either), and with every inherited descriptor
//     >= 3 closed (the agent's sockets and database files are not the program's business).
//   - One poll() loop feeds stdin, reads stdout and stderr, and watches the child's exit (a pidfd;
//     without one, a 5 ms check).
//   - A little before the deadline (term_grace, at most a tenth of the run's time) the group is
//     asked to stop (SIGTERM to -pgid), so a program can clean up and say why; at the deadline, or
//     when stdout passes max_output, the group is killed (SIGKILL to -pgid). A run still ends by
//     its deadline.
//   - When the child exits, the rest of its group is killed at once (a background grandchild must
//     not outlive the call or keep the pipes open), then what is left in the pipes is read until
//     EOF, or 20 ms without data, or 100 ms after the exit (a process that left the group still
//     holding the pipe), and never past the deadline. The result is the child's own exit.
//   - The child is always reaped (waitpid), so no zombie is left behind.
//   - A process that left the group on purpose (setsid, setpgid: a daemon) would outlive the run
//     under init. kiwi-agent is a child subreaper (PR_SET_CHILD_SUBREAPER, set at start), so such
//     a process becomes the agent's child once its parent exits; every run's environment carries
//     KIWI_RUN=<deadline>.<random> and, after the run, each child of the agent that holds this
//     run's KIWI_RUN, or that of a run whose deadline has passed, is killed with its group and
//     reaped, and so is any dead one that is no run's own child and not of the agent's own
//     process group (what popen or system started is waited for by its caller) (sweep_escapees).
//     A host that is no subreaper (another program using this header) sweeps nothing.
//   - A child that does not read its stdin (EPIPE) is not an error: its input is dropped. SIGPIPE
//   is
//     blocked on the calling thread during the call and a SIGPIPE raised by it is consumed, so it
//     cannot kill a process that has not ignored it.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiwi::process {

struct Spec {
  std::vector<std::string> argv;  // argv[0] is the program's path: no PATH search, no shell
  std::vector<std::string> env;   // "NAME=value", the child's whole environment
  std::string cwd;                // "" = the agent's
  std::string_view input;         // written to the child's stdin, which is then closed
  std::size_t max_output =
      1 << 20;  // stdout bytes; more: the group is killed, End::output_exceeded
  // Then the group is killed, End::timed_out. The default, max(), is no deadline.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // How long before the deadline the group gets SIGTERM (at most a tenth of the time from the
  // start to the deadline); 0: SIGKILL at the deadline only.
  std::chrono::milliseconds term_grace{200};
};

enum class End { exited, signaled, timed_out, output_exceeded, spawn_failed };

struct Result {
  End end = End::spawn_failed;
  int exit_status = 0;  // End::exited
  int signal = 0;       // End::signaled
  std::string output;   // stdout (at most max_output bytes)
  // The end of stderr: its last lines (at most kStderrLines), joined by " | ", at most
  // kStderrMax bytes (cut at the front). The end is where a program says why it failed (Python's
  // traceback ends with the exception).
  std::string stderr_tail;
  std::string error;  // End::spawn_failed: why (e.g. "cannot execute /x: Permission denied")
  std::chrono::nanoseconds elapsed{};
};

// The PATH a program gets: Debian's for root (/etc/login.defs ENV_SUPATH), so that the tools in
// the sbin directories (smartctl, nvme, lvs) are found as they are in a root shell.
inline constexpr std::string_view kPath =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// The small fixed environment everything else is scrubbed to: PATH=kPath, LANG=C.UTF-8, and TZ
// when the agent has it. Nothing else of the agent's environment (tokens, credentials, systemd's
// variables) reaches a program.
inline std::vector<std::string> safe_environment() {
  std::vector<std::string> env{"PATH=" + std::string(kPath), "LANG=C.UTF-8"};
  if (const char* tz = std::getenv("TZ")) env.push_back(std::string("TZ=") + tz);
  return env;
}

namespace detail {

inline constexpr std::size_t kStderrMax = 512;
inline constexpr std::size_t kStderrLines = 3;
inline constexpr auto kDrainSilence = std::chrono::milliseconds(20);
inline constexpr auto kDrainMax = std::chrono::milliseconds(100);
inline constexpr auto kExitCheckTick = std::chrono::milliseconds(5);

// Closes on scope exit; -1 is "none".
struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

// A pipe whose ends are both close-on-exec and >= 3: an end that landed on 0, 1 or 2 (an agent
// started with a closed stdin) would be clobbered by the child's own dup2 onto those numbers.
inline bool make_pipe(Fd& read_end, Fd& write_end) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return false;
  for (int& f : p)
    if (f < 3) {
      const int moved = ::fcntl(f, F_DUPFD_CLOEXEC, 3);
      ::close(f);
      f = moved;
    }
  read_end.fd = p[0];
  write_end.fd = p[1];
  return p[0] >= 0 && p[1] >= 0;
}

inline void set_nonblocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

inline std::string errno_text(int err) {
  return std::strerror(err);
}

// Blocks SIGPIPE on this thread for the object's life; a SIGPIPE that our own writes raised (it
// was not pending before) is consumed before the old mask comes back, so it is never delivered.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeGuard() {
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{0, 0};
        while (sigtimedwait(&pipe_, nullptr, &zero) == -1 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
  bool was_pending_ = false;
};

inline std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Milliseconds poll() may wait until `until` (rounded up, so it never wakes just before it).
inline int poll_timeout(std::chrono::steady_clock::time_point now,
                        std::chrono::steady_clock::time_point until) {
  if (until == std::chrono::steady_clock::time_point::max()) return -1;
  if (until <= now) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
  return static_cast<int>(std::min<long long>(ms, INT_MAX));
}

// Keeps the end of stderr (the last 4 x kStderrMax bytes as they arrive, which hold the last
// kStderrLines lines unless those are long); the rest is read and dropped so the child never
// blocks on a full stderr pipe.
struct StderrTail {
  std::string text;
  void add(const char* data, std::size_t n) {
    constexpr std::size_t keep = 4 * kStderrMax;
    if (n >= keep) {
      text.assign(data + n - keep, keep);
      return;
    }
    if (text.size() + n > keep) text.erase(0, text.size() + n - keep);
    text.append(data, n);
  }
  // Its last kStderrLines non-blank lines, without their line ends, joined by " | "; cut to the
  // last kStderrMax bytes ("..." before) if longer.
  std::string finish() const {
    std::vector<std::string_view> lines;
    std::string_view rest(text);
    while (!rest.empty() && lines.size() < kStderrLines) {
      const auto nl = rest.find_last_of('\n', rest.size() - 1);
      std::string_view line = nl == std::string_view::npos ? rest : rest.substr(nl + 1);
      rest = nl == std::string_view::npos ? std::string_view() : rest.substr(0, nl);
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
        line.remove_suffix(1);
      if (!line.empty()) lines.push_back(line);
    }
    std::string out;
    for (auto it = lines.rbegin(); it != lines.rend(); ++it)
      out.append(out.empty() ? "" : " | ").append(*it);
    if (out.size() > kStderrMax) out = "..." + out.substr(out.size() - (kStderrMax - 3));
    return out;
  }
};

// ---- Processes that left a run's group ------------------------------------------------------

// The name of the variable that marks what a run started.
inline constexpr std::string_view kRunVar = "KIWI_RUN=";

// This run's mark: its deadline (CLOCK_MONOTONIC milliseconds; 0 for none) and 64 random bits.
inline std::string run_mark(std::chrono::steady_clock::time_point deadline) {
  std::uint64_t nonce = 0;
  if (::getrandom(&nonce, sizeof nonce, GRND_NONBLOCK) != sizeof nonce)
    nonce =
        static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
        (static_cast<std::uint64_t>(::gettid()) << 40);
  const long long ms =
      deadline == std::chrono::steady_clock::time_point::max()
          ? 0
          : std::chrono::duration_cast<std::chrono::milliseconds>(deadline.time_since_epoch())
                .count();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%lld.%016llx", ms, static_cast<unsigned long long>(nonce));
  return buf;
}

// The children of this process (every thread's), from /proc/self/task/*/children: the process's
// own view of itself, not a sensor's reading of a configurable procfs.
inline std::vector<pid_t> own_children() {
  std::vector<pid_t> out;
  DIR* tasks = ::opendir("/proc/self/task");
  if (!tasks) return out;
  while (const dirent* e = ::readdir(tasks)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream in(std::string("/proc/self/task/") + e->d_name + "/children");
    for (long pid; in >> pid;) out.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(tasks);
  return out;
}

struct ProcStat {
  char state = '?';
  pid_t pgid = 0, sid = 0;
};
inline std::optional<ProcStat> proc_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto paren = text.rfind(')');  // the command may hold spaces and parentheses
  if (paren == std::string::npos) return std::nullopt;
  ProcStat st;
  long ppid = 0, pgid = 0, sid = 0;
  if (std::sscanf(text.c_str() + paren + 1, " %c %ld %ld %ld", &st.state, &ppid, &pgid, &sid) != 4)
    return std::nullopt;
  st.pgid = static_cast<pid_t>(pgid);
  st.sid = static_cast<pid_t>(sid);
  return st;
}

// The KIWI_RUN mark in the environment of `pid` ("" when it has none or cannot be read).
inline std::string mark_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ");
  for (std::string var; std::getline(in, var, '\0');)
    if (std::string_view(var).starts_with(kRunVar)) return var.substr(kRunVar.size());
  return "";
}

// Whether a mark is this run's or one of a run that is over (its deadline passed).
inline bool mark_is_over(std::string_view mark, std::string_view own,
                         std::chrono::steady_clock::time_point now) {
  if (mark.empty()) return false;
  if (mark == own) return true;
  long long ms = 0;
  if (std::sscanf(std::string(mark).c_str(), "%lld.", &ms) != 1 || ms <= 0) return false;
  return std::chrono::steady_clock::time_point(std::chrono::milliseconds(ms)) < now;
}

// Kills and reaps what the run marked `own` left behind (the header comment's last rule).
inline void sweep_escapees(std::string_view own) {
  int subreaper = 0;
  if (::prctl(PR_GET_CHILD_SUBREAPER, &subreaper) != 0 || !subreaper) return;
  const pid_t session = ::getsid(0), group = ::getpgrp();
  // A killed group leader's own children come to the agent in turn: a few passes take them.
  for (int pass = 0; pass < 4; ++pass) {
    bool killed = false;
    const auto now = std::chrono::steady_clock::now();
    for (const pid_t pid : own_children()) {
      const auto st = proc_stat(pid);
      if (!st) continue;
      // A run's own child leads its group in the agent's session (it cannot call setsid), and
      // only that run reaps it.
      const bool run_child = st->pgid == pid && st->sid == session;
      if (st->state == 'Z') {
        // Dead: reaped if it came to the agent from a run (another run's group, or a session of
        // its own), not if some other code of the agent started it (popen, system: the agent's
        // group), which waits for it itself.
        if (!run_child && st->pgid != group) ::waitpid(pid, nullptr, WNOHANG);
        continue;
      }
      // A run's child is left to its run, unless it is a process of this run that moved to a
      // group of its own (setpgid): this run's child is reaped already.
      const std::string mark = mark_of(pid);
      // (A sweep of no run, own "", takes no run's child: an environment that reads empty, a
      // process between fork and exec, is no mark.)
      if (run_child ? own.empty() || mark != own : !mark_is_over(mark, own, now)) continue;
      ::kill(pid, SIGKILL);
      if (st->pgid == pid) ::kill(-pid, SIGKILL);
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      killed = true;
    }
    if (!killed) break;
  }
}

}  // namespace detail

// A child spawn() started: its pid, the leader of a process group of its own, and the agent's
// ends of its pipes (stdin to write, stdout and stderr to read; non-blocking, close-on-exec), and
// a pidfd that is readable once it exits (-1 where pidfd_open is missing). The caller waits for
// it (waitpid) and kills its group, as run() does.
struct Child {
  pid_t pid = -1;
  detail::Fd stdin_w, stdout_r, stderr_r, pidfd;
  std::string mark;  // its KIWI_RUN, for detail::sweep_escapees once it is over
};

// Starts spec.argv as run() does (no shell and no PATH search, spec.env, spec.cwd, a process group
// of its own, default signal dispositions, descriptors >= 3 closed); spec.input, max_output and
// deadline are the caller's to apply. False, with `error` saying why, when it cannot.
inline bool spawn(const Spec& spec, Child& child, std::string& error) {
  using namespace detail;
  if (spec.argv.empty() || spec.argv[0].empty()) {
    error = "no program given";
    return false;
  }
  const std::string& program = spec.argv[0];
  if (!spec.cwd.empty()) {
    // posix_spawn reports a failed chdir with the same errno as a failed exec; saying which one
    // failed is worth a stat.
    struct stat st {};
    const int err = ::stat(spec.cwd.c_str(), &st) != 0 ? errno : S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
    if (err != 0) {
      error = "cannot change to directory " + spec.cwd + ": " + errno_text(err);
      return false;
    }
  }

  Fd in_r, out_w, err_w;
  if (!make_pipe(in_r, child.stdin_w) || !make_pipe(child.stdout_r, out_w) ||
      !make_pipe(child.stderr_r, err_w)) {
    error = "cannot create a pipe: " + errno_text(errno);
    return false;
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_r.fd, 0);
  posix_spawn_file_actions_adddup2(&actions, out_w.fd, 1);
  posix_spawn_file_actions_adddup2(&actions, err_w.fd, 2);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  if (!spec.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, spec.cwd.c_str());

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);

  child.mark = run_mark(spec.deadline);
  std::vector<std::string> env = spec.env;
  env.push_back(std::string(kRunVar) + child.mark);
  auto argv = c_strings(spec.argv);
  auto envp = c_strings(env);
  const int rc =
      ::posix_spawn(&child.pid, program.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    child.pid = -1;
    error = "cannot execute " + program + ": " + errno_text(rc);
    return false;
  }
  set_nonblocking(child.stdin_w.fd);
  set_nonblocking(child.stdout_r.fd);
  set_nonblocking(child.stderr_r.fd);
  // The child's exit as a readable descriptor; where pidfd_open is missing (kernel < 5.3, a
  // seccomp filter), the caller checks every kExitCheckTick instead.
  child.pidfd.fd = static_cast<int>(::syscall(SYS_pidfd_open, child.pid, 0));
  return true;
}

// Runs spec.argv with spec.env in spec.cwd and waits for it, as the header comment describes.
inline Result run(const Spec& spec) {
  using Clock = std::chrono::steady_clock;
  using namespace detail;
  const auto started = Clock::now();
  Result r;
  Child child;
  if (!spawn(spec, child, r.error)) {
    r.end = End::spawn_failed;
    r.elapsed = Clock::now() - started;
    return r;
  }
  const pid_t pid = child.pid;
  Fd& in_w = child.stdin_w;
  Fd& out_r = child.stdout_r;
  Fd& err_r = child.stderr_r;
  Fd& pidfd = child.pidfd;
  SigpipeGuard sigpipe_guard;

  std::size_t input_done = 0;
  if (spec.input.empty()) in_w.reset();
  StderrTail tail;
  bool exited = false;  // the child is a zombie (not reaped yet: its pid stays ours)
  bool killed = false;  // the group was killed
  bool termed = false;  // the group was asked to stop (SIGTERM), its time nearly up
  Clock::time_point term_at = Clock::time_point::max();
  if (spec.deadline != Clock::time_point::max() && spec.term_grace.count() > 0)
    term_at =
        spec.deadline - std::min<Clock::duration>(spec.term_grace, (spec.deadline - started) / 10);
  Clock::time_point exit_seen;
  Clock::time_point last_data;
  char buf[65536];

  auto kill_group = [&] {
    if (!killed) {
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);  // should it have moved to another group (setpgid)
    }
    killed = true;
  };
  auto child_exited = [&] {
    siginfo_t info{};
    return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           info.si_pid == pid;
  };
  // Reads what is there; false at EOF or a read error (the end is closed then).
  auto drain = [&](Fd& fd, bool is_stdout) {
    for (;;) {
      const ssize_t n = ::read(fd.fd, buf, sizeof buf);
      if (n > 0) {
        last_data = Clock::now();
        if (is_stdout) {
          const std::size_t room = spec.max_output - r.output.size();
          if (static_cast<std::size_t>(n) > room) {
            r.output.append(buf, room);
            r.end = End::output_exceeded;
            return;
          }
          r.output.append(buf, static_cast<std::size_t>(n));
        } else {
          tail.add(buf, static_cast<std::size_t>(n));
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      fd.reset();  // EOF, or an error that more reading will not cure
      return;
    }
  };

  r.end = End::exited;  // until something else is found
  for (;;) {
    auto now = Clock::now();
    if (!exited && child_exited()) {
      exited = true;
      exit_seen = now;
      last_data = now;
      kill_group();  // the rest of its group: nothing outlives the call
      in_w.reset();
    }
    if (out_r.fd < 0 && err_r.fd < 0 && exited) break;
    if (now >= spec.deadline) {
      if (!exited) r.end = End::timed_out;
      break;
    }
    if (!exited && !termed && now >= term_at) {
      ::kill(-pid, SIGTERM);  // its end, whenever it comes now, is the time-out's
      termed = true;
      r.end = End::timed_out;
    }
    Clock::time_point until = termed ? spec.deadline : std::min(spec.deadline, term_at);
    if (exited) {
      const auto drain_end = std::min(last_data + kDrainSilence, exit_seen + kDrainMax);
      if (now >= drain_end) break;
      until = std::min(until, drain_end);
    } else if (pidfd.fd < 0 &&
               (until == Clock::time_point::max() || until - now > kExitCheckTick)) {
      until = now + kExitCheckTick;
    }

    pollfd fds[4];
    nfds_t n = 0;
    int i_in = -1, i_out = -1, i_err = -1, i_pid = -1;
    if (in_w.fd >= 0) fds[i_in = static_cast<int>(n++)] = {in_w.fd, POLLOUT, 0};
    if (out_r.fd >= 0) fds[i_out = static_cast<int>(n++)] = {out_r.fd, POLLIN, 0};
    if (err_r.fd >= 0) fds[i_err = static_cast<int>(n++)] = {err_r.fd, POLLIN, 0};
    if (pidfd.fd >= 0 && !exited) fds[i_pid = static_cast<int>(n++)] = {pidfd.fd, POLLIN, 0};
    const int ready = ::poll(fds, n, poll_timeout(now, until));
    if (ready < 0) {
      if (errno == EINTR) continue;
      kill_group();  // poll itself failing is not something to wait out
      r.end = End::timed_out;
      break;
    }
    if (i_in >= 0 && fds[i_in].revents) {
      if (fds[i_in].revents & (POLLERR | POLLHUP)) {
        in_w.reset();  // the child closed its stdin: the rest of the input is not wanted
      } else {
        const ssize_t w =
            ::write(in_w.fd, spec.input.data() + input_done, spec.input.size() - input_done);
        if (w > 0) input_done += static_cast<std::size_t>(w);
        if ((w < 0 && errno != EAGAIN && errno != EINTR) || input_done == spec.input.size())
          in_w.reset();  // EPIPE included: a program that ignores its input is not an error
      }
    }
    if (i_out >= 0 && fds[i_out].revents) drain(out_r, true);
    if (r.end == End::output_exceeded) break;
    if (i_err >= 0 && fds[i_err].revents) drain(err_r, false);
  }

  // Whatever ended the loop, nothing of the group is left running, and the child is reaped.
  if (!exited || r.end != End::exited) kill_group();
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (r.end == End::exited) {
    if (WIFSIGNALED(status)) {
      r.end = End::signaled;
      r.signal = WTERMSIG(status);
    } else {
      r.exit_status = WEXITSTATUS(status);
    }
  }
  sweep_escapees(child.mark);
  r.stderr_tail = tail.finish();
  r.elapsed = Clock::now() - started;
  return r;
}

namespace detail {
// "2s", "500ms", "1m": the largest unit that divides the time exactly, as the TOML writes it.
inline std::string format_timeout(std::chrono::nanoseconds t) {
  const long long ms = std::chrono::round<std::chrono::milliseconds>(t).count();
  struct Unit {
    const char* suffix;
    long long ms;
  };
  static constexpr Unit kUnits[] = {
      {"d", 86'400'000}, {"h", 3'600'000}, {"m", 60'000}, {"s", 1000}, {"ms", 1}};
  for (const auto& u : kUnits)
    if (ms != 0 && ms % u.ms == 0) return std::to_string(ms / u.ms) + u.suffix;
  return std::to_string(ms) + "ms";
}
}  // namespace detail

// The command a shell or env could not find or run, from its complaint on stderr ("sh: 1: lvs:
// not found", "bash: line 1: lvs: command not found", "env: 'python4': No such file or
// directory"); "" if none is recognised.
inline std::string missing_command(std::string_view stderr_tail) {
  for (std::string_view marker : {": command not found", ": not found",
                                  ": No such file or directory", ": Permission denied"}) {
    const auto at = stderr_tail.rfind(marker);
    if (at == std::string_view::npos) continue;
    std::string_view before = stderr_tail.substr(0, at);
    const auto start = before.find_last_of(":|");
    before = start == std::string_view::npos ? before : before.substr(start + 1);
    while (!before.empty() && (before.front() == ' ' || before.front() == '\''))
      before.remove_prefix(1);
    while (!before.empty() && before.back() == '\'') before.remove_suffix(1);
    if (!before.empty() && before.find(' ') == std::string_view::npos) return std::string(before);
  }
  return "";
}

// The one wording of how a run ended, for error messages: "exited with status 3", "killed by
// signal 11 (SIGSEGV)", "timed out after 2s", "printed more than 1048576 bytes" (the cap, which is
// what r.output holds then), or the spawn error; for a shell's 127 and 126 the command that could
// not be found or run, when stderr names it; "; stderr: <its last lines>" when the program wrote
// any. `timeout` is the time the run had, for the timed-out wording.
inline std::string describe(const Result& r, std::chrono::nanoseconds timeout) {
  std::string s;
  switch (r.end) {
    case End::exited: {
      s = "exited with status " + std::to_string(r.exit_status);
      if (r.exit_status != 126 && r.exit_status != 127) break;
      const std::string what = missing_command(r.stderr_tail);
      s += r.exit_status == 127 ? " (a command it runs was not found"
                                : " (a command it runs could not be executed";
      s += (what.empty() ? "" : ": " + what) + ")";
      break;
    }
    case End::signaled: {
      s = "killed by signal " + std::to_string(r.signal);
      if (const char* abbrev = ::sigabbrev_np(r.signal)) s += std::string(" (SIG") + abbrev + ")";
      break;
    }
    case End::timed_out:
      s = "timed out after " + detail::format_timeout(timeout);
      break;
    case End::output_exceeded:
      s = "printed more than " + std::to_string(r.output.size()) + " bytes";
      break;
    case End::spawn_failed:
      s = r.error;
      break;
  }
  if (!r.stderr_tail.empty()) s += "; stderr: " + r.stderr_tail;
  return s;
}

}  // namespace kiwi::process
