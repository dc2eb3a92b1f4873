// kiwi::process::run (agent/include/kiwi/process.hpp) on real programs: /bin/sh, cat, env, yes.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "emulator.hpp"
#include "kiwi/process.hpp"
#include "test_support.hpp"

using namespace std::chrono_literals;
using kiwi::process::End;
using kiwi::process::Result;
using kiwi::process::Spec;
using kiwi_test::process_gone;

namespace {

Spec sh(const std::string& script, std::chrono::milliseconds timeout = 10s) {
  Spec s;
  s.argv = {"/bin/sh", "-c", script};
  s.env = kiwi::process::safe_environment();
  s.deadline = std::chrono::steady_clock::now() + timeout;
  return s;
}

// Under qemu-user a program that cannot be executed is one that exits 127 (emulator.hpp).
void skip_if_exec_error_lost(const Result& r) {
  if (!kiwi_test::emulator().empty() && r.end == End::exited && r.exit_status == 127)
    kiwi_test::skip_test(kiwi_test::emulator_limit::lost_exec_error);
}

pid_t first_line_pid(const std::string& output) {
  return static_cast<pid_t>(std::stol(output.substr(0, output.find('\n'))));
}

}  // namespace

TEST_CASE("process: exit status, stdout and the last lines of stderr") {
  Result r = kiwi::process::run(
      sh("echo out; echo zero >&2; echo first >&2; echo >&2; echo second >&2; echo why >&2; "
         "exit 3"));
  CHECK(r.end == End::exited);
  CHECK(r.exit_status == 3);
  CHECK(r.output == "out\n");
  CHECK(r.stderr_tail == "first | second | why");  // the last three lines, blank ones skipped
  CHECK(kiwi::process::describe(r, 2s) == "exited with status 3; stderr: first | second | why");

  r = kiwi::process::run(sh("printf 'no newline at the end'"));
  CHECK(r.end == End::exited);
  CHECK(r.exit_status == 0);
  CHECK(r.output == "no newline at the end");
  CHECK(r.stderr_tail.empty());
  CHECK(kiwi::process::describe(r, 2s) == "exited with status 0");
}

TEST_CASE(
    "process: the end of stderr is kept to 512 bytes, cut at the front, CRs before newlines "
    "dropped") {
  Result r = kiwi::process::run(
      sh("head -c 100000 /dev/zero | tr '\\0' x >&2; echo >&2; echo 'the reason' >&2; exit 1"));
  CHECK(r.end == End::exited);
  CHECK(r.stderr_tail.size() == 512);
  CHECK(r.stderr_tail.starts_with("...xxx"));
  CHECK(r.stderr_tail.ends_with("xxx | the reason"));
  r = kiwi::process::run(sh("printf 'windows\\r\\nline two\\r\\n' >&2"));
  CHECK(r.stderr_tail == "windows | line two");
}

TEST_CASE("process: a command a script runs that is not there, or cannot run, is named") {
  Result r = kiwi::process::run(sh("no-such-command-kiwi --x; exit $?"));
  CHECK(r.exit_status == 127);
  CHECK_THAT(kiwi::process::describe(r, 2s),
             Catch::StartsWith("exited with status 127 (a command it runs was not found: "
                               "no-such-command-kiwi); stderr: "));
  using kiwi::process::missing_command;
  CHECK(missing_command("bash: line 1: lvs: command not found") == "lvs");
  CHECK(missing_command("/usr/bin/env: 'python4': No such file or directory") == "python4");
  CHECK(missing_command("x | sh: 1: ./tool: Permission denied") == "./tool");
  CHECK(missing_command("something else went wrong") == "");
  Result none;
  none.end = End::exited;
  none.exit_status = 126;
  CHECK(kiwi::process::describe(none, 2s) ==
        "exited with status 126 (a command it runs could not be executed)");
}

TEST_CASE("process: a program killed by a signal") {
  Result r = kiwi::process::run(sh("echo crashing >&2; kill -SEGV $$"));
  CHECK(r.end == End::signaled);
  CHECK(r.signal == SIGSEGV);
  CHECK(kiwi::process::describe(r, 2s) == "killed by signal 11 (SIGSEGV); stderr: crashing");
}

TEST_CASE("process: a hang is killed at the deadline, its background child with it") {
  const auto t0 = std::chrono::steady_clock::now();
  Result r = kiwi::process::run(sh("sleep 100 & echo $!; echo hanging >&2; sleep 100", 300ms));
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(r.end == End::timed_out);
  CHECK(took >= 270ms);  // SIGTERM a tenth of its time before the deadline ends the shell
  CHECK(took < 1500ms);
  CHECK(r.stderr_tail == "hanging");
  CHECK(kiwi::process::describe(r, 300ms) == "timed out after 300ms; stderr: hanging");
  REQUIRE(!r.output.empty());
  const pid_t grandchild = first_line_pid(r.output);
  CHECK(process_gone(grandchild));
}

TEST_CASE("process: near its deadline the program is asked to stop (SIGTERM), then killed") {
  // It says why as it goes: the stderr of the time-out has it.
  Result r = kiwi::process::run(
      sh("trap 'echo stopping: closed the serial port >&2; exit 4' TERM; sleep 100 & wait", 500ms));
  CHECK(r.end == End::timed_out);
  CHECK(kiwi::process::describe(r, 500ms) ==
        "timed out after 500ms; stderr: stopping: closed the serial port");
  // One that ignores SIGTERM is killed at the deadline all the same.
  const auto t0 = std::chrono::steady_clock::now();
  r = kiwi::process::run(sh("trap '' TERM; echo $$; sleep 100 & wait; sleep 100", 300ms));
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(r.end == End::timed_out);
  CHECK(took >= 300ms);
  CHECK(took < 1500ms);
  REQUIRE(!r.output.empty());
  CHECK(process_gone(first_line_pid(r.output)));
  // term_grace 0: SIGKILL at the deadline only, so a TERM trap never runs.
  auto spec = sh("trap 'echo stopping >&2; exit 4' TERM; sleep 100 & wait", 300ms);
  spec.term_grace = 0ms;
  r = kiwi::process::run(spec);
  CHECK(r.end == End::timed_out);
  CHECK(r.stderr_tail.empty());
}

TEST_CASE("process: when the program exits, a background child still holding stdout is killed") {
  // Without killing the group, reading would wait for the sleep's copy of stdout to close.
  const auto t0 = std::chrono::steady_clock::now();
  Result r = kiwi::process::run(sh("sleep 100 & echo $!; echo done; exit 0", 20s));
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(r.end == End::exited);
  CHECK(r.exit_status == 0);
  CHECK(took < 2s);
  REQUIRE(r.output.find("done\n") != std::string::npos);
  CHECK(process_gone(first_line_pid(r.output)));
}

TEST_CASE("process: without a deadline a quick program still just runs") {
  Spec s;
  s.argv = {"/bin/echo", "hi"};
  CHECK(s.deadline == std::chrono::steady_clock::time_point::max());
  Result r = kiwi::process::run(s);
  CHECK(r.end == End::exited);
  CHECK(r.output == "hi\n");
}

TEST_CASE("process: a chatty program is capped and killed") {
  Spec s;
  s.argv = {"/usr/bin/yes"};
  s.max_output = 1000;
  s.deadline = std::chrono::steady_clock::now() + 10s;
  Result r = kiwi::process::run(s);
  CHECK(r.end == End::output_exceeded);
  CHECK(r.output.size() == 1000);
  CHECK(r.elapsed < 5s);
  CHECK(kiwi::process::describe(r, 10s) == "printed more than 1000 bytes");

  // Exactly the cap is fine.
  r = kiwi::process::run([] {
    Spec exact = sh("head -c 1000 /dev/zero");
    exact.max_output = 1000;
    return exact;
  }());
  CHECK(r.end == End::exited);
  CHECK(r.output.size() == 1000);
}

TEST_CASE("process: stdin is fed from memory and then closed") {
  Spec s;
  s.argv = {"/bin/cat"};
  s.input = "line one\nline two\n";
  s.deadline = std::chrono::steady_clock::now() + 10s;
  Result r = kiwi::process::run(s);
  CHECK(r.end == End::exited);
  CHECK(r.output == "line one\nline two\n");

  // More than a pipe holds, read while it is written.
  const std::string big(3 << 20, 'k');
  s.input = big;
  s.max_output = 4 << 20;
  r = kiwi::process::run(s);
  CHECK(r.end == End::exited);
  CHECK(r.output == big);

  // No input: the program reads EOF at once instead of waiting.
  s.input = {};
  r = kiwi::process::run(s);
  CHECK(r.end == End::exited);
  CHECK(r.output.empty());
}

TEST_CASE("process: a program that ignores its input is not an error, and SIGPIPE harms nobody") {
  // This test process does not ignore SIGPIPE, as the agent does: a write to the closed pipe
  // would kill it if run() let the signal through.
  auto old = ::signal(SIGPIPE, SIG_DFL);
  const std::string big(4 << 20, 'i');
  Spec s = sh("echo ignored");
  s.input = big;
  Result r = kiwi::process::run(s);
  ::signal(SIGPIPE, old);
  CHECK(r.end == End::exited);
  CHECK(r.exit_status == 0);
  CHECK(r.output == "ignored\n");
}

TEST_CASE("process: the environment is exactly the one given, and the run's mark") {
  Spec s;
  s.argv = {"/usr/bin/env"};
  s.env = {"A=1", "B=two words"};
  s.deadline = std::chrono::steady_clock::now() + 10s;
  Result r = kiwi::process::run(s);
  CHECK(r.end == End::exited);
  CHECK_THAT(r.output, Catch::Matches("A=1\nB=two words\nKIWI_RUN=[0-9]+\\.[0-9a-f]{16}\n"));

  s.env = {};
  r = kiwi::process::run(s);
  CHECK_THAT(r.output, Catch::Matches("KIWI_RUN=[0-9]+\\.[0-9a-f]{16}\n"));
}

TEST_CASE("process: a run's mark is over when it is the run's own or its deadline has passed") {
  using kiwi::process::detail::mark_is_over;
  using kiwi::process::detail::run_mark;
  const auto now = std::chrono::steady_clock::now();
  const std::string own = run_mark(now + 10s), other = run_mark(now + 10s);
  CHECK(own != other);  // 64 random bits apart
  CHECK(mark_is_over(own, own, now));
  CHECK_FALSE(mark_is_over(other, own, now));         // another run, still going
  CHECK(mark_is_over(run_mark(now - 1s), own, now));  // a run whose time is up
  CHECK_FALSE(mark_is_over(run_mark(std::chrono::steady_clock::time_point::max()), own, now));
  CHECK_FALSE(mark_is_over("", own, now));
  CHECK_FALSE(mark_is_over("junk", own, now));
}

TEST_CASE("process: safe_environment keeps PATH, LANG and TZ, nothing else") {
  ::setenv("KIWI_TEST_SECRET", "x", 1);
  ::setenv("TZ", "Europe/Berlin", 1);
  auto env = kiwi::process::safe_environment();
  const std::string path = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  CHECK(env == std::vector<std::string>{path, "LANG=C.UTF-8", "TZ=Europe/Berlin"});
  ::unsetenv("TZ");
  env = kiwi::process::safe_environment();
  CHECK(env == std::vector<std::string>{path, "LANG=C.UTF-8"});
  ::unsetenv("KIWI_TEST_SECRET");
}

TEST_CASE("process: the program inherits no descriptor beyond 0, 1 and 2") {
  // Opened without O_CLOEXEC, as a library might: only closefrom in the child keeps it out.
  // (A number of its own: the shell's glob below opens the directory as its fd 3.)
  const int null = ::open("/dev/null", O_RDONLY);
  REQUIRE(null >= 0);
  const int leaked = ::fcntl(null, F_DUPFD, 100);
  ::close(null);
  REQUIRE(leaked >= 100);
  const std::string n = std::to_string(leaked);
  Result r =
      kiwi::process::run(sh("for f in 0 1 2 " + n +
                            "; do test -e /proc/$$/fd/$f && echo open $f || echo closed $f; done"));
  ::close(leaked);
  CHECK(r.end == End::exited);
  CHECK(r.output == "open 0\nopen 1\nopen 2\nclosed " + n + "\n");
}

TEST_CASE("process: the program leads its own process group, with default signals") {
  // The agent blocks SIGHUP/SIGTERM in its threads and ignores SIGPIPE; the program gets neither.
  // (The masks are read by grep exec'd in the shell's place: dash blocks every signal for a moment
  // around each command it starts, so reading the shell's own /proc entry from a child races.)
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &block, &old_mask);
  auto old_pipe = ::signal(SIGPIPE, SIG_IGN);
  Result r = kiwi::process::run(
      sh("echo $$; cut -d' ' -f5 /proc/$$/stat; exec grep -E '^Sig(Blk|Ign):' /proc/self/status"));
  ::signal(SIGPIPE, old_pipe);
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  CHECK(r.end == End::exited);
  std::istringstream lines(r.output);
  std::string pid, pgrp, blocked, ignored;
  std::getline(lines, pid);
  std::getline(lines, pgrp);
  std::getline(lines, blocked);
  std::getline(lines, ignored);
  CHECK(pid == pgrp);
  CHECK(blocked == "SigBlk:\t0000000000000000");
  // The 31 classic signals (the low 31 bits). glibc's posix_spawn leaves its two internal signals
  // (32, 33) ignored, which glibc's start-up in the new program takes over again.
  REQUIRE(ignored.rfind("SigIgn:\t", 0) == 0);
  CHECK((std::stoull(ignored.substr(8), nullptr, 16) & 0x7fffffffULL) == 0);
}

TEST_CASE("process: the working directory") {
  kiwi_test::TempDir dir;
  Spec s;
  s.argv = {"/bin/pwd"};
  s.cwd = dir.path.string();
  Result r = kiwi::process::run(s);
  CHECK(r.end == End::exited);
  CHECK(r.output == dir.path.string() + "\n");

  s.cwd = (dir.path / "missing").string();
  r = kiwi::process::run(s);
  CHECK(r.end == End::spawn_failed);
  CHECK(r.error == "cannot change to directory " + s.cwd + ": No such file or directory");
}

TEST_CASE("process: a program that cannot be started says why") {
  kiwi_test::TempDir dir;
  Spec s;
  s.argv = {(dir.path / "missing").string()};
  Result r = kiwi::process::run(s);
  skip_if_exec_error_lost(r);
  CHECK(r.end == End::spawn_failed);
  CHECK(r.error == "cannot execute " + s.argv[0] + ": No such file or directory");
  CHECK(kiwi::process::describe(r, 1s) == r.error);

  const auto not_executable = dir.path / "script";
  std::ofstream(not_executable) << "#!/bin/sh\necho hi\n";
  std::filesystem::permissions(
      not_executable, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  s.argv = {not_executable.string()};
  r = kiwi::process::run(s);
  CHECK(r.end == End::spawn_failed);
  CHECK(r.error == "cannot execute " + s.argv[0] + ": Permission denied");

  s.argv = {};
  r = kiwi::process::run(s);
  CHECK(r.end == End::spawn_failed);
  CHECK(r.error == "no program given");
}

TEST_CASE("process: no PATH search and no shell") {
  Spec s;
  s.argv = {"echo", "$HOME", "*"};
  s.env = kiwi::process::safe_environment();
  Result r = kiwi::process::run(s);
  skip_if_exec_error_lost(r);
  CHECK(r.end == End::spawn_failed);
  CHECK(r.error == "cannot execute echo: No such file or directory");
  s.argv[0] = "/bin/echo";
  r = kiwi::process::run(s);
  CHECK(r.output == "$HOME *\n");
}

TEST_CASE("process: runs from several threads at once") {
  std::vector<std::thread> threads;
  std::vector<std::string> outputs(4);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t, &outputs] {
      for (int i = 0; i < 5; ++i) {
        Result r = kiwi::process::run(sh("echo " + std::to_string(t) + "-" + std::to_string(i)));
        outputs[static_cast<std::size_t>(t)] += r.output;
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) {
    std::string expected;
    for (int i = 0; i < 5; ++i) expected += std::to_string(t) + "-" + std::to_string(i) + "\n";
    CHECK(outputs[static_cast<std::size_t>(t)] == expected);
  }
}

TEST_CASE("process: describe's wording of each end") {
  Result r;
  r.end = End::timed_out;
  CHECK(kiwi::process::describe(r, 2s) == "timed out after 2s");
  CHECK(kiwi::process::describe(r, 500ms) == "timed out after 500ms");
  CHECK(kiwi::process::describe(r, 90s) == "timed out after 90s");
  CHECK(kiwi::process::describe(r, 2min) == "timed out after 2m");
  r.end = End::output_exceeded;
  r.output.assign(1 << 20, 'x');
  CHECK(kiwi::process::describe(r, 2s) == "printed more than 1048576 bytes");
  r.end = End::signaled;
  r.signal = SIGKILL;
  r.stderr_tail = "oom";
  CHECK(kiwi::process::describe(r, 2s) == "killed by signal 9 (SIGKILL); stderr: oom");
}
