// The harness itself: an agent a test started never outlives the test, however the test ends.
// The test binary runs itself (under the emulator of a cross build) on a hidden probe that starts
// an agent, writes its PID to a file and then ends the way it is told; this test then looks for
// that PID, and that PID only.
#include <catch2/catch.hpp>
#include <cstdlib>

#include "checks.hpp"

using namespace kiwi_test;
using namespace std::chrono_literals;

TEST_CASE(
    "harness: an agent started by a test that fails, throws, aborts, is skipped or is killed is "
    "stopped with it") {
  struct Way {
    const char* name;
    int exit_code;  // of the probe: Catch2's count of failed test cases, 77, or 128 + a signal
  };
  const Way way = GENERATE(values<Way>({{"require", 1},
                                        {"throw", 1},
                                        {"abort", 128 + SIGABRT},
                                        {"skip", 77},
                                        {"killed", 128 + SIGKILL}}));
  INFO("the probe ends by: " << way.name);
  TempDir tmp;
  const fs::path pid_file = tmp.path / "agent.pid";
  // Its path is read from /proc/self/exe (under qemu-user, /proc/<pid>/exe is the emulator).
  Process probe(emulated({fs::read_symlink("/proc/self/exe").string(), "[.harness-probe]"}),
                {tmp.path / "out",
                 tmp.path / "err",
                 {{"KIWI_HARNESS_PROBE", way.name},
                  {"KIWI_HARNESS_PROBE_PID_FILE", pid_file.string()},
                  {"KIWI_CTEST", "1"}}});  // skip_test() then ends the process with 77
  const int code = probe.stop(0, 60s);
  INFO("the probe's output:\n" << read_text(tmp.path / "out") << read_text(tmp.path / "err"));
  CHECK(code == way.exit_code);
  const std::string pid_text = read_text(pid_file);
  REQUIRE_FALSE(pid_text.empty());  // it started an agent
  const long pid = std::stol(pid_text);
  REQUIRE(pid > 0);
  INFO("agent " << pid << ": " << read_text("/proc/" + std::to_string(pid) + "/cmdline"));
  // Gone, or a zombie waiting for whoever inherited it to reap it: not running.
  CHECK(process_gone(pid, 10s));
}

TEST_CASE("harness probe: starts an agent, writes its PID, then ends as KIWI_HARNESS_PROBE says",
          "[.harness-probe]") {
  const char* way = std::getenv("KIWI_HARNESS_PROBE");
  const char* pid_file = std::getenv("KIWI_HARNESS_PROBE_PID_FILE");
  REQUIRE(way);
  REQUIRE(pid_file);
  AgentOptions options;
  options.ready = Ready::listening;
  Agent agent(options);
  write_text(pid_file, std::to_string(agent.pid()));
  const std::string end = way;
  if (end == "require") REQUIRE(end == "a failed REQUIRE: the stack unwinds");
  if (end == "throw") throw std::runtime_error("an exception: the stack unwinds");
  if (end == "abort") std::abort();  // no destructor runs
  if (end == "skip") skip_test("_Exit(77): no destructor runs");
  if (end == "killed") kill(getpid(), SIGKILL);  // as ctest's timeout does
  FAIL("KIWI_HARNESS_PROBE=" << end << ": not a way to end");
}
