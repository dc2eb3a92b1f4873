// How a test starts a binary of this build (the agent, or the test binary itself). In a cross build
// ctest runs the tests under an emulator (qemu-user, CMAKE_CROSSCOMPILING_EMULATOR; see
// cmake/debian-cross.cmake), and tests/CMakeLists.txt puts the same command in KIWI_TEST_EMULATOR
// (words separated by spaces): a binary a test starts runs under it too, as the kernel would refuse
// to execute a foreign binary (ENOEXEC) unless binfmt_misc had been told about it. Unset or empty
// (a native build, or cross-built tests run by hand on the board itself), binaries start directly.
// Here too: how much longer a test waits under the emulator (slowdown), and the emulator's limits
// that a test skips with (emulator_limit).
#pragma once

#include <chrono>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace kiwi_test {

// The emulator command, one word each; empty when binaries run directly.
inline std::vector<std::string> emulator() {
  std::vector<std::string> words;
  if (const char* command = std::getenv("KIWI_TEST_EMULATOR")) {
    std::istringstream in(command);
    for (std::string word; in >> word;) words.push_back(word);
  }
  return words;
}

// `argv`, whose first word is a binary of this build, as a test starts it here.
inline std::vector<std::string> emulated(std::vector<std::string> argv) {
  const auto words = emulator();
  argv.insert(argv.begin(), words.begin(), words.end());
  return argv;
}

// The same for a shell command line: the emulator command and a space, or "".
inline std::string emulated_shell_prefix() {
  std::string prefix;
  for (const auto& word : emulator()) prefix += word + " ";
  return prefix;
}

// How much longer than natively a test gives the agent under the emulator, for a deadline that
// includes the agent's own start-up or work. qemu-user translates the code as it runs it: the
// agent took 0.5-1.1 s from exec to listening under qemu-aarch64 on this project's 2-core VM while
// the suite ran, against 45-70 ms natively; 4 keeps a 1 s deadline (then 4 s) well above the
// slowest start-up measured. Natively 1: no deadline changes there. A wait for the wall clock
// alone (an interval, a timeout the test configures) takes as long under the emulator.
inline int slowdown() {
  return emulator().empty() ? 1 : 4;
}

template <class Rep, class Period>
std::chrono::duration<Rep, Period> scaled(std::chrono::duration<Rep, Period> natively) {
  return natively * slowdown();
}

// What qemu-user cannot do, each the reason a test gives when it meets it under the emulator
// (skip_test: Skipped, never passed); natively the same test runs and asserts as written. A test
// skips only when the limit shows (the emulator is set and the result is the one the limit gives),
// so it runs in full where an emulator does better. Two more are skipped where they show: no
// ptrace under qemu-user (FrozenThread, integration/harness.hpp) and the agent's re-execution of
// itself, which the kernel refuses for a foreign binary (integration/test_agent.cpp).
namespace emulator_limit {

// qemu-user has no vfork: it runs clone(CLONE_VM | CLONE_VFORK), which glibc's posix_spawn uses,
// as a plain fork, so the error the child stores when execve fails is written to its own copy of
// the memory and never reaches the parent. posix_spawn returns success and the child exits 127;
// kiwi::process::run says "exited with status 127" where on the board (and natively) it says
// "cannot execute PATH: <why>".
inline constexpr char lost_exec_error[] =
    "qemu-user runs posix_spawn's vfork as a fork: a failed exec is the child's exit 127, its "
    "errno never reaches the parent (a limit of the emulator, not of the agent)";

// qemu-user refuses prctl(PR_SET_CHILD_SUBREAPER) (EINVAL): the agent is no subreaper there, so
// a process a program leaves in a session of its own goes to init, as before kiwi/process.hpp's
// sweep, and nothing of the agent can reach it.
inline constexpr char no_subreaper[] =
    "qemu-user refuses PR_SET_CHILD_SUBREAPER: what a program leaves outside its group goes to "
    "init (a limit of the emulator, not of the agent)";

}  // namespace emulator_limit

}  // namespace kiwi_test
