// The line an agent a plugin crashed writes last (fatal_signal.hpp), built without allocating.
#include <signal.h>
#include <sys/prctl.h>

#include <catch2/catch.hpp>
#include <string>
#include <thread>

#include "base/fatal_signal.hpp"

using namespace kiwi::agent;

namespace {
std::string line_for(int sig, const char* activity, long sender = 0, unsigned size = 512) {
  char buf[512];
  const unsigned n = fatal_signal_line(sig, activity, sender, buf, size);
  CHECK(n < size);
  CHECK(buf[n] == '\0');
  return std::string(buf, n);
}
}  // namespace

TEST_CASE("fatal signal: the line names the signal, the call in progress and the thread") {
  prctl(PR_SET_NAME, "kiwi-s:crash");
  CHECK(line_for(SIGSEGV, "sensor crash (/p/crash.so)") ==
        "kiwi-agent: error: SIGSEGV (invalid memory access) in sensor crash (/p/crash.so), thread "
        "kiwi-s:crash; the agent stops with the signal");
  CHECK(line_for(SIGBUS, nullptr) ==
        "kiwi-agent: error: SIGBUS (bus error) with no sensor or route call in progress, thread "
        "kiwi-s:crash; the agent stops with the signal");
  CHECK_THAT(line_for(SIGFPE, "x"), Catch::StartsWith("kiwi-agent: error: SIGFPE (arithmetic"));
  CHECK_THAT(line_for(SIGILL, "x"), Catch::StartsWith("kiwi-agent: error: SIGILL (illegal"));
  CHECK_THAT(line_for(40, "x"), Catch::StartsWith("kiwi-agent: error: signal 40 in x,"));
  // Sent by another process (systemd's watchdog): the thread it landed on ran nothing that matters.
  CHECK(line_for(SIGABRT, "sensor cpu (/p/cpu.so)", 1) ==
        "kiwi-agent: error: SIGABRT (abort) sent by process 1, thread kiwi-s:crash; the agent "
        "stops with the signal");
  // A buffer too small: cut, still terminated.
  CHECK(line_for(SIGSEGV, "sensor crash", 0, 20) == "kiwi-agent: error: ");
}

TEST_CASE("fatal signal: activities nest, and the outer one is back when the inner one ends") {
  static const char outer[] = "sensor a (/p/a.so)";
  static const char inner[] = "route /x (/p/x.so)";
  CHECK(current_activity() == nullptr);
  {
    CurrentActivity a(outer);
    CHECK(current_activity() == outer);
    {
      CurrentActivity b(inner);
      CHECK(current_activity() == inner);
    }
    CHECK(current_activity() == outer);
    // Per thread: another thread runs nothing.
    const char* there = outer;
    std::thread([&] { there = current_activity(); }).join();
    CHECK(there == nullptr);
  }
  CHECK(current_activity() == nullptr);
}
