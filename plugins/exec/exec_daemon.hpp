// The exec sensor's long-running mode (mode = "daemon", as Telegraf's execd): one program kept
// running across samples, asked for each one by a newline on its stdin, answering with its
// metrics and a line "# EOF" (OpenMetrics' end marker). Restarted with backoff when it exits, its
// stderr logged line by line. See README.md, "A program kept running".
#pragma once

#include <chrono>
#include <kiwi/plugin.hpp>
#include <kiwi/process.hpp>
#include <optional>
#include <string>

namespace kiwi::exec {

class Daemon {
 public:
  using Clock = std::chrono::steady_clock;

  // `spec` (argv, env, max_output; no deadline) is how each start runs the program; a failed
  // start or an exit waits 1 s before the next start, doubling each time in a row up to
  // `restart_max`, and back to 1 s after an answer.
  Daemon(kiwi::process::Spec spec, kiwi::Logger& log, std::chrono::milliseconds restart_max);
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;
  // Stops the program (stop()).
  ~Daemon();

  // Asks for one sample and waits until `deadline` for the answer: the text before its "# EOF"
  // line. Starts the program first when it is not running and its restart is due. Throws
  // std::runtime_error saying why there is no answer: it is waiting to restart, it exited (its
  // status and the end of its stderr), it printed more than max_output, or it did not answer in
  // time (`timeout`, as the message words it); in the last three cases it is stopped and
  // restarted.
  std::string ask(Clock::time_point deadline, std::chrono::nanoseconds timeout);

  // Whether the program runs now, and its pid (-1 when not).
  pid_t pid() const { return child_ ? child_->pid : -1; }

 private:
  // Ends the program: with `grace`, SIGTERM to its group and up to kStopGrace for it to exit; then
  // SIGKILL; reaps it and whatever it left outside its group (kiwi/process.hpp).
  void stop(bool grace = true);
  // The program exited, or is stopped now: reaps it, schedules the next start, logs what
  // happened (`what`, the end of its stderr, when it restarts) and returns that text.
  std::string finish(std::string what, bool grace = true);
  std::runtime_error ended(std::string what, bool grace = true);
  void spawn();
  // Reads stderr, logging each complete line (at most kLinesPerAnswer an answer, each cut at
  // kStderrMax bytes) and keeping the tail for messages.
  void read_stderr();
  void log_line(std::string_view line);
  bool exited();  // without reaping
  // How it ended ("exited with status 3", "killed by signal 9 (SIGKILL)") when it has, without
  // reaping it; `otherwise` when it still runs.
  std::string exit_text(std::string otherwise);

  kiwi::process::Spec spec_;
  kiwi::Logger& log_;
  std::chrono::milliseconds restart_max_;
  std::chrono::milliseconds backoff_{1000};
  Clock::time_point next_start_{};
  std::string last_end_;  // why it is not running, for the samples until the restart

  std::optional<kiwi::process::Child> child_;  // while it runs
  std::string out_;                            // stdout not yet answered
  std::string err_line_;                       // a stderr line not complete yet
  kiwi::process::detail::StderrTail tail_;     // for error messages
  std::size_t lines_logged_ = 0;               // stderr lines logged for this answer
  std::size_t lines_dropped_ = 0;              // and not logged, over the limit
};

}  // namespace kiwi::exec
