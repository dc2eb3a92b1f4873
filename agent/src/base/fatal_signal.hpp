// The last word of an agent a plugin crashed: on SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT one
// line on stderr (the log) names the sensor or route whose code was running, then the signal takes
// its default action, so the exit status and the core dump are the kernel's as without it.
//
// What was running is a per-thread pointer (CurrentActivity) the collector's workers set around
// each sample() call and the router around each handle() call; the text it points to lives as
// long as the plugin instance, so the handler only reads it and calls write(2).
#pragma once

namespace kiwi::agent {

// Installs the handler for the five signals (once; later calls do nothing). Any thread.
void install_fatal_signal_handler();

// Names what this thread runs until the end of the scope: "sensor cpu (/usr/lib/.../cpu.so)".
// `text` must outlive the scope (the handler may read it at any instant until then). Scopes nest;
// the inner one wins, and the outer one is back when it ends.
class CurrentActivity {
 public:
  explicit CurrentActivity(const char* text) noexcept;
  ~CurrentActivity();
  CurrentActivity(const CurrentActivity&) = delete;
  CurrentActivity& operator=(const CurrentActivity&) = delete;

 private:
  const char* previous_;
};

// What this thread runs now (the innermost CurrentActivity's text), or null.
const char* current_activity() noexcept;

// The line the handler writes for `sig` while `activity` (null: none) runs, or for a signal
// process `sender` sent (> 0; then `activity` is not named: the kernel picks any thread for it),
// without the newline:
// "kiwi-agent: error: SIGSEGV (invalid memory access) in sensor crash (/x/crash.so), thread
// kiwi-s:crash; the agent stops with the signal". Also "... with no sensor or route call in
// progress, thread kiwi-http" for a null `activity`, "SIGABRT (abort) sent by process 1, thread
// ..." for a sent one. Fills `buf` (NUL-terminated, truncated to `size`) and returns the length.
// Async-signal-safe.
unsigned fatal_signal_line(int sig, const char* activity, long sender, char* buf,
                           unsigned size) noexcept;

}  // namespace kiwi::agent
