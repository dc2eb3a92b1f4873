// kiwi-test-freeze-thread PID NAME SECONDS: stops the thread of process PID named NAME
// (/proc/PID/task/TID/comm) for SECONDS, then lets it go on; the other threads run meanwhile.
// For tests that need a stalled collector ("kiwi-collector"), as a stuck disk would stall it,
// from programs that cannot ptrace themselves (the browser test; the C++ tests use FrozenThread).
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: kiwi-test-freeze-thread PID NAME SECONDS\n");
    return 2;
  }
  const std::string task = std::string("/proc/") + argv[1] + "/task";
  pid_t tid = -1;
  std::error_code ec;
  for (auto& t : std::filesystem::directory_iterator(task, ec)) {
    std::ifstream in(t.path() / "comm");
    std::string comm;
    std::getline(in, comm);
    if (comm == argv[2]) tid = std::stoi(t.path().filename().string());
  }
  if (tid < 0) {
    std::fprintf(stderr, "kiwi-test-freeze-thread: no thread named %s in %s\n", argv[2], argv[1]);
    return 1;
  }
  if (ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0 ||
      ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0) {
    std::fprintf(stderr, "kiwi-test-freeze-thread: ptrace %d: %s\n", tid, std::strerror(errno));
    return 1;
  }
  int status = 0;
  waitpid(tid, &status, __WALL);
  std::printf("frozen %d\n", tid);
  std::fflush(stdout);
  sleep(static_cast<unsigned>(std::atoi(argv[3])));
  ptrace(PTRACE_DETACH, tid, nullptr, nullptr);
  return 0;
}
