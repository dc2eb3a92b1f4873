// The exec sensor's daemon mode, on its own: a late call does not stop a healthy program, and
// what the program's children leave behind is reaped (the agent is a child subreaper).
#include <sys/prctl.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "emulator.hpp"
#include "exec_daemon.hpp"
#include "sensor_test_util.hpp"
#include "test_support.hpp"

using namespace std::chrono_literals;
using kiwi::exec::Daemon;
using kiwi_sensor_test::RecordingLogger;

namespace {

struct Program {
  std::filesystem::path path;
  explicit Program(const std::string& text) {
    char dir[] = "/tmp/kiwi-daemon-XXXXXX";
    REQUIRE(::mkdtemp(dir));
    path = std::filesystem::path(dir) / "prog.sh";
    std::ofstream(path) << text;
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  }
  ~Program() { std::filesystem::remove_all(path.parent_path()); }
  kiwi::process::Spec spec() const {
    kiwi::process::Spec s;
    s.argv = {path.string()};
    s.env = kiwi::process::safe_environment();
    return s;
  }
};

// Zombies among this process's children.
std::vector<pid_t> zombies() {
  std::vector<pid_t> out;
  for (pid_t pid : kiwi::process::detail::own_children())
    if (auto st = kiwi::process::detail::proc_stat(pid); st && st->state == 'Z') out.push_back(pid);
  return out;
}

}  // namespace

TEST_CASE("exec daemon: a call that starts after its deadline does not stop the program") {
  Program p("#!/bin/sh\nwhile read -r l; do echo 'up 1'; echo '# EOF'; done\n");
  RecordingLogger log;
  Daemon d(p.spec(), log, 30s);
  CHECK(d.ask(std::chrono::steady_clock::now() + 5s, 5s) == "up 1\n");
  const pid_t pid = d.pid();
  CHECK_THROWS_WITH(d.ask(std::chrono::steady_clock::now() - 1ms, 1s),
                    Catch::StartsWith("no time left to ask for a sample"));
  CHECK(d.pid() == pid);  // the same program, not restarted
  CHECK(d.ask(std::chrono::steady_clock::now() + 5s, 5s) == "up 1\n");
}

TEST_CASE("exec daemon: orphans of the program's children are reaped, not left zombies") {
  // As the agent is (main.cpp): what loses its parent comes to this process.
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0 && !kiwi_test::emulator().empty())
    kiwi_test::skip_test(kiwi_test::emulator_limit::no_subreaper);
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  Program p("#!/bin/sh\nwhile read -r l; do (sleep 0.05 &); echo 'up 1'; echo '# EOF'; done\n");
  RecordingLogger log;
  {
    Daemon d(p.spec(), log, 30s);
    // Each ask reaps the zombies there before it; asked until a few were seen (an orphan takes
    // its time to end on a busy machine).
    std::size_t seen = 0;
    for (int i = 0; i < 40 && seen < 3; ++i) {
      const std::vector<pid_t> before = zombies();
      CHECK(d.ask(std::chrono::steady_clock::now() + 5s, 5s) == "up 1\n");
      const std::vector<pid_t> after = zombies();
      for (pid_t z : before) CHECK(std::find(after.begin(), after.end(), z) == after.end());
      seen += before.size();
      std::this_thread::sleep_for(100ms);
    }
    CHECK(seen >= 3);
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
}
