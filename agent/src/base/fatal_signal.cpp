#include "base/fatal_signal.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace kiwi::agent {

namespace {

// Constant-initialised and trivial: reading it in the handler touches no lazy TLS machinery.
thread_local const char* t_activity = nullptr;

struct FatalSignal {
  int sig;
  const char* name;
  const char* what;
};
constexpr FatalSignal kFatalSignals[] = {
    {SIGSEGV, "SIGSEGV", "invalid memory access"},
    {SIGBUS, "SIGBUS", "bus error"},
    {SIGFPE, "SIGFPE", "arithmetic exception"},
    {SIGILL, "SIGILL", "illegal instruction"},
    {SIGABRT, "SIGABRT", "abort"},
};

// Appends to a fixed buffer; no allocation, no locale, nothing but stores.
struct Line {
  char* buf;
  unsigned size;
  unsigned len = 0;
  void add(const char* s) {
    while (s && *s && len + 1 < size) buf[len++] = *s++;
    buf[len] = '\0';
  }
  void add_number(unsigned long v) {
    char num[24];
    unsigned i = sizeof num - 1;
    num[i] = '\0';
    do num[--i] = static_cast<char>('0' + v % 10);
    while ((v /= 10) != 0 && i > 0);
    add(num + i);
  }
};

void on_fatal_signal(int sig, siginfo_t* info, void*) {
  const int saved_errno = errno;
  char buf[768];
  // Sent by another process (systemd's watchdog sends SIGABRT, kill(1) anything): it arrives on
  // whichever thread, so what that thread runs is beside the point.
  const bool sent = info && info->si_code <= 0 && info->si_pid != ::getpid();
  unsigned n = fatal_signal_line(sig, t_activity, sent ? static_cast<long>(info->si_pid) : 0, buf,
                                 sizeof buf - 1);
  buf[n++] = '\n';
  for (unsigned done = 0; done < n;) {
    const ssize_t w = ::write(2, buf + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    done += static_cast<unsigned>(w);
  }
  // SA_RESETHAND put the default action back. A signal someone sent (kill, abort(), raise()) is
  // sent again: blocked while this handler runs, it takes effect as it returns. A fault (si_code
  // > 0) needs nothing: returning runs the faulting instruction again, which now kills the
  // process with the kernel's own report and core dump of the original fault.
  if (info == nullptr || info->si_code <= 0) ::raise(sig);
  errno = saved_errno;
}

}  // namespace

unsigned fatal_signal_line(int sig, const char* activity, long sender, char* buf,
                           unsigned size) noexcept {
  if (size == 0) return 0;
  Line line{buf, size};
  const FatalSignal* known = nullptr;
  for (const auto& s : kFatalSignals)
    if (s.sig == sig) known = &s;
  line.add("kiwi-agent: error: ");
  if (known) {
    line.add(known->name);
    line.add(" (");
    line.add(known->what);
    line.add(")");
  } else {
    line.add("signal ");
    line.add_number(static_cast<unsigned long>(sig));
  }
  if (sender > 0) {
    line.add(" sent by process ");
    line.add_number(static_cast<unsigned long>(sender));
  } else if (activity) {
    line.add(" in ");
    line.add(activity);
  } else {
    line.add(" with no sensor or route call in progress");
  }
  char thread[17] = {};
  if (::prctl(PR_GET_NAME, thread) == 0 && thread[0]) {
    line.add(", thread ");
    line.add(thread);
  }
  line.add("; the agent stops with the signal");
  return line.len;
}

void install_fatal_signal_handler() {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  struct sigaction sa {};
  sa.sa_sigaction = on_fatal_signal;
  sigemptyset(&sa.sa_mask);
  // SA_ONSTACK: on a thread with an alternate signal stack, a stack overflow still gets its line.
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
  for (const auto& s : kFatalSignals) ::sigaction(s.sig, &sa, nullptr);
}

const char* current_activity() noexcept {
  return t_activity;
}

CurrentActivity::CurrentActivity(const char* text) noexcept : previous_(t_activity) {
  t_activity = text;
  std::atomic_signal_fence(std::memory_order_seq_cst);  // set before the call starts
}

CurrentActivity::~CurrentActivity() {
  std::atomic_signal_fence(std::memory_order_seq_cst);  // the call is over before it is cleared
  t_activity = previous_;
}

}  // namespace kiwi::agent
