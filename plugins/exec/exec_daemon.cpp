#include "exec_daemon.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>

namespace kiwi::exec {

namespace {

using namespace std::chrono_literals;
namespace detail = kiwi::process::detail;

constexpr auto kStopGrace = 200ms;           // from SIGTERM to SIGKILL when it is stopped
constexpr std::size_t kLinesPerAnswer = 20;  // stderr lines logged per answer at most
constexpr std::string_view kEnd = "# EOF";

// Where the line "# EOF" starts in `out` (a line of its own, LF or CRLF ended), and where the text
// after it starts; npos when it is not there (yet).
std::pair<std::size_t, std::size_t> find_end(std::string_view out) {
  for (std::size_t at = 0; at < out.size();) {
    const std::size_t nl = out.find('\n', at);
    if (nl == std::string_view::npos) break;
    std::string_view line = out.substr(at, nl - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line == kEnd) return {at, nl + 1};
    at = nl + 1;
  }
  return {std::string_view::npos, std::string_view::npos};
}

std::string seconds_text(Daemon::Clock::duration d) {
  return detail::format_timeout(std::chrono::ceil<std::chrono::seconds>(d));
}

}  // namespace

Daemon::Daemon(kiwi::process::Spec spec, kiwi::Logger& log, std::chrono::milliseconds restart_max)
    : spec_(std::move(spec)), log_(log), restart_max_(restart_max) {
  spec_.deadline = Clock::time_point::max();
  backoff_ = std::min<std::chrono::milliseconds>(1s, restart_max_);
}

Daemon::~Daemon() {
  if (child_) stop();
}

std::string Daemon::exit_text(std::string otherwise) {
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(child_->pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
      info.si_pid != child_->pid)
    return otherwise;
  kiwi::process::Result r;
  r.end = info.si_code == CLD_EXITED ? kiwi::process::End::exited : kiwi::process::End::signaled;
  r.exit_status = info.si_status;
  r.signal = info.si_status;
  return kiwi::process::describe(r, {});
}

bool Daemon::exited() {
  if (child_->pidfd.fd >= 0) {
    pollfd p{child_->pidfd.fd, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;
  }
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(child_->pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == child_->pid;
}

void Daemon::log_line(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
  if (line.empty()) return;
  if (lines_logged_ >= kLinesPerAnswer) {
    ++lines_dropped_;
    return;
  }
  ++lines_logged_;
  std::string text = "stderr: " + std::string(line.substr(0, detail::kStderrMax));
  if (line.size() > detail::kStderrMax) text += "...";
  log_.warn(text);
}

void Daemon::read_stderr() {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(child_->stderr_r.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) child_->stderr_r.reset();  // EOF
      return;
    }
    tail_.add(buf, static_cast<std::size_t>(n));
    std::string_view data(buf, static_cast<std::size_t>(n));
    for (std::size_t nl; (nl = data.find('\n')) != std::string_view::npos;) {
      err_line_.append(data.substr(0, std::min(nl, 2 * detail::kStderrMax)));
      log_line(err_line_);
      err_line_.clear();
      data.remove_prefix(nl + 1);
    }
    // A line longer than this is logged cut; the rest of it is not kept.
    if (err_line_.size() < 2 * detail::kStderrMax)
      err_line_.append(data.substr(0, 2 * detail::kStderrMax - err_line_.size()));
  }
}

void Daemon::spawn() {
  child_.emplace();
  out_.clear();
  err_line_.clear();
  tail_ = {};
  std::string error;
  if (!kiwi::process::spawn(spec_, *child_, error)) {
    child_.reset();
    throw ended(error);
  }
  // Its stderr is read while it is asked for a sample: a bigger pipe (1 MiB, the most an
  // unprivileged process may ask for) holds what it writes between samples.
  ::fcntl(child_->stderr_r.fd, F_SETPIPE_SZ, 1 << 20);
  log_.info("started " + spec_.argv[0] + " (pid " + std::to_string(child_->pid) + ")");
}

void Daemon::stop(bool grace) {
  if (grace) {
    ::kill(-child_->pid, SIGTERM);
    const auto until = Clock::now() + kStopGrace;
    while (!exited() && Clock::now() < until) {
      pollfd p{child_->pidfd.fd, POLLIN, 0};
      ::poll(&p, child_->pidfd.fd >= 0 ? 1 : 0, 5);
    }
  }
  ::kill(-child_->pid, SIGKILL);  // its group: nothing of it outlives it
  ::kill(child_->pid, SIGKILL);   // should it have moved to another group (setpgid)
  while (::waitpid(child_->pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  detail::sweep_escapees(child_->mark);
  child_.reset();
}

std::runtime_error Daemon::ended(std::string what, bool grace) {
  return std::runtime_error(finish(std::move(what), grace));
}

std::string Daemon::finish(std::string what, bool grace) {
  if (child_) {
    if (child_->stderr_r.fd >= 0) read_stderr();
    if (!err_line_.empty()) log_line(err_line_);
    stop(grace);
  }
  if (lines_dropped_)
    log_.warn("stderr: " + std::to_string(lines_dropped_) + " more lines not logged");
  lines_dropped_ = 0;
  const std::string tail = tail_.finish();
  if (!tail.empty()) what += "; stderr: " + tail;
  last_end_ = what;
  next_start_ = Clock::now() + backoff_;
  const std::string message = what + "; restarting in " + seconds_text(backoff_);
  backoff_ = std::min(backoff_ * 2, restart_max_);
  log_.warn(message);
  return message;
}

std::string Daemon::ask(Clock::time_point deadline, std::chrono::nanoseconds timeout) {
  if (!child_) {
    const auto now = Clock::now();
    if (now < next_start_)
      throw std::runtime_error(last_end_ + "; restarting in " + seconds_text(next_start_ - now));
    spawn();
  }
  // Orphans of its own children that died since: reaped (the agent is their subreaper).
  detail::sweep_escapees("");
  // Called late (a loaded machine): no time to ask, and no reason to stop a healthy program.
  if (Clock::now() >= deadline)
    throw std::runtime_error(
        "no time left to ask for a sample (the call started after its "
        "deadline)");
  detail::SigpipeGuard sigpipe_guard;
  lines_logged_ = 0;
  read_stderr();
  // What it printed unasked, between samples, is not this sample's answer.
  out_.clear();
  char buf[65536];
  for (ssize_t n; (n = ::read(child_->stdout_r.fd, buf, sizeof buf)) > 0;) {
  }

  // Gone since the last answer: say how, rather than that its stdin is closed.
  if (exited()) throw ended(exit_text(""));
  for (;;) {
    const ssize_t w = ::write(child_->stdin_w.fd, "\n", 1);
    if (w == 1 || (w < 0 && errno == EAGAIN)) break;  // EAGAIN: a full pipe, requests queued
    if (w < 0 && errno == EINTR) continue;
    throw ended(exit_text("closed its stdin (it is asked for each sample by a newline there)"));
  }

  auto take_answer = [&](std::size_t end_at, std::size_t rest_at) {
    std::string answer = out_.substr(0, end_at);
    out_.erase(0, rest_at);
    backoff_ = std::min<std::chrono::milliseconds>(1s, restart_max_);
    if (lines_dropped_)
      log_.warn("stderr: " + std::to_string(lines_dropped_) + " more lines not logged");
    lines_dropped_ = 0;
    return answer;
  };
  for (;;) {
    const auto now = Clock::now();
    if (now >= deadline)
      throw ended("no answer (a line \"# EOF\" after the metrics) within " +
                      detail::format_timeout(timeout),
                  false);  // no grace: the sample's time is up
    pollfd fds[3];
    nfds_t n = 0;
    fds[n++] = {child_->stdout_r.fd, POLLIN, 0};
    const int i_err = child_->stderr_r.fd >= 0 ? static_cast<int>(n) : -1;
    if (i_err >= 0) fds[n++] = {child_->stderr_r.fd, POLLIN, 0};
    if (child_->pidfd.fd >= 0) fds[n++] = {child_->pidfd.fd, POLLIN, 0};
    const auto until = child_->pidfd.fd >= 0 ? deadline : std::min(deadline, now + 5ms);
    if (::poll(fds, n, detail::poll_timeout(now, until)) < 0 && errno != EINTR)
      throw ended("poll failed: " + detail::errno_text(errno));
    if (i_err >= 0 && fds[i_err].revents) read_stderr();
    bool eof = false;
    if (fds[0].revents) {
      for (;;) {
        const ssize_t r = ::read(child_->stdout_r.fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
          eof = r == 0;
          break;
        }
        out_.append(buf, static_cast<std::size_t>(r));
        if (out_.size() > spec_.max_output) {
          throw ended("printed more than " + std::to_string(spec_.max_output) +
                      " bytes without a line \"# EOF\"");
        }
      }
      if (const auto [end_at, rest_at] = find_end(out_); end_at != std::string::npos)
        return take_answer(end_at, rest_at);
    }
    if (eof || exited()) {
      // Gone, or going: what it answered before it went still counts.
      for (ssize_t r; out_.size() <= spec_.max_output &&
                      (r = ::read(child_->stdout_r.fd, buf, sizeof buf)) > 0;)
        out_.append(buf, static_cast<std::size_t>(r));
      if (child_->stderr_r.fd >= 0) read_stderr();
      const std::string how = exit_text("closed its stdout");
      if (const auto [end_at, rest_at] = find_end(out_); end_at != std::string::npos) {
        std::string answer = take_answer(end_at, rest_at);
        finish(how);
        return answer;
      }
      throw ended(how);
    }
  }
}

}  // namespace kiwi::exec
