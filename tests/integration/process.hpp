// Programs an integration test starts (the agent, Prometheus, a one-shot command): how they are
// started, waited for and stopped, so that none outlives the test that started it.
//
// A failed REQUIRE or an exception unwinds the test's stack, and the destructor of Process (or of
// the harness's Agent, which holds one) kills and reaps it. Not every end unwinds: abort(), a
// crash, skip_test() (which ends the process with _Exit(77)) and ctest's SIGKILL at its timeout
// run no destructor. For those each child asks the kernel, before it executes the program, to
// kill it with the test (PR_SET_PDEATHSIG): a suite that fails under qemu-user once left three
// agents running for an hour after it ended, reparented to init.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

extern char** environ;

namespace kiwi_test {

// How a program is started: where its output goes and what differs in its environment.
struct SpawnOptions {
  std::filesystem::path out = "/dev/null";  // its stdout, created or truncated (same inode)
  std::filesystem::path err = "/dev/null";  // its stderr, likewise
  // Variables set (or, nullopt, removed) in its environment; the rest is the test's own.
  std::map<std::string, std::optional<std::string>> env;
};

namespace detail {

inline std::vector<std::string> environment_with(
    const std::map<std::string, std::optional<std::string>>& changes) {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    const std::string_view var(*e);
    if (!changes.count(std::string(var.substr(0, var.find('='))))) out.emplace_back(var);
  }
  for (const auto& [name, value] : changes)
    if (value) out.push_back(name + "=" + *value);
  return out;
}

inline std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace detail

// Starts `args` (args[0] a path: no PATH search) and returns its pid. The child leads a process
// group of its own, so a test can kill it with whatever it started in that group, and it is
// killed with SIGKILL when the thread that started it ends (PR_SET_PDEATHSIG: the tests start
// their programs from the test case's own thread). The kernel keeps that setting across execve
// of a program that gains no privileges, so the agent's own re-execution and a wrapper such as
// prlimit or qemu-user keep it; a program that changes its user (setpriv) loses it. Throws when
// the program cannot be executed.
inline pid_t spawn(const std::vector<std::string>& args, const SpawnOptions& options) {
  std::vector<std::string> argv_strings = args;
  std::vector<std::string> env_strings = detail::environment_with(options.env);
  const std::vector<char*> argv = detail::pointers(argv_strings);
  const std::vector<char*> envp = detail::pointers(env_strings);
  const int out = ::open(options.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err = ::open(options.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int exec_error[2] = {-1, -1};  // the child writes errno here when execve fails
  if (out < 0 || err < 0 || ::pipe2(exec_error, O_CLOEXEC) != 0) {
    const std::string why = std::strerror(errno);
    for (int fd : {out, err, exec_error[0], exec_error[1]})
      if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot start " + args.at(0) + ": " + why);
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Only async-signal-safe calls from here on: the test process may have other threads.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the test ended before the line above
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::execve(argv[0], argv.data(), envp.data());
    const int e = errno;
    (void)!::write(exec_error[1], &e, sizeof e);
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(out);
  ::close(err);
  ::close(exec_error[1]);
  if (pid < 0) {
    ::close(exec_error[0]);
    throw std::runtime_error("fork for " + args.at(0) + ": " + std::strerror(fork_errno));
  }
  ::setpgid(pid, pid);  // also here, so the group exists whichever side runs first
  int e = 0;
  ssize_t n;
  do n = ::read(exec_error[0], &e, sizeof e);
  while (n < 0 && errno == EINTR);
  ::close(exec_error[0]);
  if (n == static_cast<ssize_t>(sizeof e)) {
    ::waitpid(pid, nullptr, 0);
    throw std::runtime_error("cannot execute " + args.at(0) + ": " + std::strerror(e));
  }
  return pid;
}

inline pid_t spawn(const std::vector<std::string>& args, const std::filesystem::path& out,
                   const std::filesystem::path& err) {
  return spawn(args, SpawnOptions{out, err, {}});
}

// The exit code of a wait status: the program's, or 128 + the signal that killed it (as a shell).
inline int exit_code_of(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// SIGKILL to the process group `pid` leads and to `pid` itself (it may have left the group).
inline void kill_group(pid_t pid) {
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
}

// Waits for child `pid` at most `timeout` and returns its exit code; if it has not exited by
// then, kills its group, reaps it and throws.
inline int wait_exit(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return exit_code_of(status);
    if (r < 0 && errno != EINTR)
      throw std::runtime_error("waitpid " + std::to_string(pid) + ": " + std::strerror(errno));
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill_group(pid);
  ::waitpid(pid, &status, 0);
  throw std::runtime_error("process " + std::to_string(pid) + " did not exit within " +
                           std::to_string(timeout.count()) + " ms; killed");
}

// One started program, owned: the destructor kills its process group and reaps it if it still
// runs, however the test leaves the scope.
class Process {
 public:
  Process() = default;
  Process(const std::vector<std::string>& args, const SpawnOptions& options)
      : pid_(spawn(args, options)) {}
  ~Process() { kill_now(); }
  Process(Process&& other) noexcept : pid_(std::exchange(other.pid_, -1)) {}
  Process& operator=(Process&& other) noexcept {
    if (this != &other) {
      kill_now();
      pid_ = std::exchange(other.pid_, -1);
    }
    return *this;
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // Its pid while it runs (not reaped yet), else -1.
  pid_t pid() const { return pid_; }
  bool started() const { return pid_ > 0; }

  // Its exit code if it has exited (and reaps it), nullopt while it runs.
  std::optional<int> poll() {
    if (pid_ <= 0) return std::nullopt;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) != pid_) return std::nullopt;
    pid_ = -1;
    return exit_code_of(status);
  }

  // Sends `sig` (0: none, only waits) and returns the exit code; one that has not exited within
  // `timeout` is killed with its group and reaped, and this throws.
  int stop(int sig, std::chrono::milliseconds timeout) {
    if (pid_ <= 0) throw std::runtime_error("stop: the process is not running");
    if (sig != 0) ::kill(pid_, sig);
    const pid_t pid = std::exchange(pid_, -1);
    return wait_exit(pid, timeout);
  }

  // SIGKILL to its group, then reaped; nothing if it is not running.
  void kill_now() noexcept {
    if (pid_ <= 0) return;
    kill_group(pid_);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

}  // namespace kiwi_test
