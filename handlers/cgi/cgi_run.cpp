#include "cgi_run.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

namespace kiwi::cgi {

namespace {

using process::detail::kDrainMax;
using process::detail::kDrainSilence;
using process::detail::kExitCheckTick;

// A Content-Type line in a header block (which ends with its empty line).
bool has_content_type(std::string_view block) {
  constexpr std::string_view want = "content-type:";
  for (std::size_t at = 0; at < block.size();) {
    std::size_t nl = block.find('\n', at);
    if (nl == std::string_view::npos) nl = block.size();
    const std::string_view line = block.substr(at, nl - at);
    if (line.size() >= want.size()) {
      bool same = true;
      for (std::size_t i = 0; i < want.size() && same; ++i)
        same = (line[i] | 0x20) == (want[i] | 0x20);  // ':' | 0x20 is ':', '-' | 0x20 is '-'
      if (same) return true;
    }
    at = nl + 1;
  }
  return false;
}

// How long before `deadline` the group gets SIGTERM: at most a tenth of `timeout`, 200 ms.
std::chrono::milliseconds term_grace(std::chrono::milliseconds timeout) {
  return std::min<std::chrono::milliseconds>(std::chrono::milliseconds(200), timeout / 10);
}

}  // namespace

std::size_t header_block_end(std::string_view output) {
  for (std::size_t at = 0;;) {
    const std::size_t nl = output.find('\n', at);
    if (nl == std::string_view::npos) return std::string_view::npos;
    std::string_view line = output.substr(at, nl - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) return nl + 1;
    at = nl + 1;
  }
}

Run::Run(Settings settings) : settings_(std::move(settings)) {}

Run::~Run() {
  if (child_.pid > 0 && !finished_) {
    if (!exited_ && child_exited()) exited_ = true;
    if (!ended_ && settings_.log)
      settings_.log->debug(settings_.who + " killed: the server let its response go after " +
                           std::to_string(body_sent_) +
                           " bytes of its body (the client went away, HEAD, or a stop)");
    kill_group();  // what it left running in its group too
    finish();
  }
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

bool Run::child_exited() {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(child_.pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == child_.pid;
}

void Run::kill_group() {
  if (!killed_ && child_.pid > 0) {
    ::kill(-child_.pid, SIGKILL);
    ::kill(child_.pid, SIGKILL);  // should it have moved to another group (setpgid)
  }
  killed_ = true;
}

void Run::finish() {
  if (finished_ || child_.pid <= 0) return;
  finished_ = true;
  int status = 0;
  while (::waitpid(child_.pid, &status, 0) < 0 && errno == EINTR) {
  }
  process::detail::sweep_escapees(child_.mark);  // what it left outside its group (setsid)
  if (result_.end == process::End::exited) {
    if (WIFSIGNALED(status)) {
      result_.end = process::End::signaled;
      result_.signal = WTERMSIG(status);
    } else {
      result_.exit_status = WEXITSTATUS(status);
    }
  }
  result_.stderr_tail = tail_.finish();
  child_.stdin_w.reset();
  child_.stdout_r.reset();
  child_.stderr_r.reset();
  child_.pidfd.reset();
}

void Run::service_pipes() {
  if (child_.stdin_w.fd >= 0) {
    const ssize_t w =
        ::write(child_.stdin_w.fd, input_.data() + input_done_, input_.size() - input_done_);
    if (w > 0) input_done_ += static_cast<std::size_t>(w);
    // EPIPE included: a program that does not read its input is not an error.
    if ((w < 0 && errno != EAGAIN && errno != EINTR) || input_done_ == input_.size())
      child_.stdin_w.reset();
  }
  char buf[4096];
  while (child_.stderr_r.fd >= 0) {
    const ssize_t n = ::read(child_.stderr_r.fd, buf, sizeof buf);
    if (n > 0) {
      tail_.add(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    child_.stderr_r.reset();  // EOF
  }
  if (!exited_ && child_exited()) {
    exited_ = true;
    exit_seen_ = last_data_ = Clock::now();
    kill_group();  // the rest of its group: nothing outlives the program
    child_.stdin_w.reset();
    if (epoll_fd_ >= 0 && child_.pidfd.fd >= 0)
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, child_.pidfd.fd, nullptr);  // readable for good now
  }
}

Run::Head Run::start_and_read_head(const process::Spec& spec) {
  const auto started = Clock::now();
  deadline_ = started + settings_.timeout;
  term_at_ = deadline_ - term_grace(settings_.timeout);
  if (!process::spawn(spec, child_, result_.error)) {
    result_.end = process::End::spawn_failed;
    return Head::spawn_failed;
  }
  result_.end = process::End::exited;
  input_ = spec.input;
  if (input_.empty()) child_.stdin_w.reset();
  process::detail::SigpipeGuard sigpipe_guard;
  char buf[65536];
  auto stop = [&](process::End end, Head head) {
    kill_group();
    result_.end = end;
    finish();
    return head;
  };
  for (;;) {
    const auto now = Clock::now();
    service_pipes();
    if (child_.stdout_r.fd < 0 && child_.stderr_r.fd < 0 && exited_) break;
    if (now >= deadline_) {
      if (!exited_) return stop(process::End::timed_out, Head::timed_out);
      break;
    }
    if (!exited_ && !termed_ && now >= term_at_) {
      ::kill(-child_.pid, SIGTERM);  // its end, whenever it comes now, is the time-out's
      termed_ = true;
      result_.end = process::End::timed_out;
    }
    Clock::time_point until = termed_ ? deadline_ : std::min(deadline_, term_at_);
    if (exited_) {
      const auto drain_end = std::min(last_data_ + kDrainSilence, exit_seen_ + kDrainMax);
      if (now >= drain_end) break;
      until = std::min(until, drain_end);
    } else if (child_.pidfd.fd < 0) {
      until = std::min(until, now + kExitCheckTick);
    }
    pollfd fds[4];
    nfds_t n = 0;
    if (child_.stdin_w.fd >= 0) fds[n++] = {child_.stdin_w.fd, POLLOUT, 0};
    if (child_.stdout_r.fd >= 0) fds[n++] = {child_.stdout_r.fd, POLLIN, 0};
    if (child_.stderr_r.fd >= 0) fds[n++] = {child_.stderr_r.fd, POLLIN, 0};
    if (child_.pidfd.fd >= 0 && !exited_) fds[n++] = {child_.pidfd.fd, POLLIN, 0};
    if (::poll(fds, n, process::detail::poll_timeout(now, until)) < 0 && errno != EINTR)
      return stop(process::End::timed_out, Head::timed_out);  // poll failing: not waited out
    // Read until the answer's head is whole, and no further: what follows waits in the pipe for
    // the stream. So a program past max_output has its body cut short whenever its header block
    // ended within the limit, however much it printed before this thread came to read.
    std::size_t end = header_block_end(output_);
    // Whole once its header block ended, unless a block without Content-Type has no body byte
    // yet: that one is read to the end, so that a body after it is refused (502) as it was
    // before streaming, and a bodiless answer (a redirect, a 204) is a whole one.
    auto head_whole = [&] {
      return end != std::string::npos &&
             (output_.size() > end || has_content_type(std::string_view(output_).substr(0, end)));
    };
    bool over = false;  // printed past max_output
    while (child_.stdout_r.fd >= 0 && (!head_whole() || termed_)) {
      std::size_t want = sizeof buf;
      if (settings_.max_output != 0)  // one byte past the limit tells that it was passed
        want = static_cast<std::size_t>(
            std::min<std::uint64_t>(want, settings_.max_output - printed_ + 1));
      const ssize_t got = ::read(child_.stdout_r.fd, buf, want);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) break;  // EAGAIN, or an error that the next round does not cure either
      if (got == 0) {
        child_.stdout_r.reset();
        break;
      }
      last_data_ = Clock::now();
      printed_ += static_cast<std::uint64_t>(got);
      output_.append(buf, static_cast<std::size_t>(got));
      if (settings_.max_output != 0 && printed_ > settings_.max_output) {
        output_.resize(settings_.max_output);  // what it printed within the limit
        over = true;
      }
      end = header_block_end(output_);
      if (over) break;
    }
    if (over) {
      if (end == std::string::npos)
        return stop(process::End::output_exceeded, Head::output_exceeded);
      body_start_ = end;  // the stream cuts the body short at once (read_body)
      return Head::complete;
    }
    if (end == std::string::npos) {
      if (output_.size() > kMaxHeaderBytes)
        return stop(process::End::output_exceeded, Head::header_too_large);
      continue;
    }
    if (head_whole()) {
      if (termed_) continue;  // its time is nearly up: it ends as the time-out's
      body_start_ = end;
      return Head::complete;
    }
  }
  finish();
  return Head::ended;
}

void Run::add_to_epoll(int fd, std::uint32_t events) {
  if (fd < 0) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
}

std::ptrdiff_t Run::read_body(char* buffer, std::size_t capacity, Stream::Wait& wait) {
  if (ended_) return Stream::error;  // not called after the end; harmless if it is
  // What came with the header block first; then output_ is let go.
  if (body_start_ + prefix_sent_ < output_.size()) {
    const std::size_t n = std::min(output_.size() - body_start_ - prefix_sent_, capacity);
    std::memcpy(buffer, output_.data() + body_start_ + prefix_sent_, n);
    prefix_sent_ += n;
    body_sent_ += n;
    if (body_start_ + prefix_sent_ == output_.size()) {
      std::string().swap(output_);
      body_start_ = prefix_sent_ = 0;
    }
    return static_cast<std::ptrdiff_t>(n);
  }
  if (epoll_fd_ < 0) {
    // The first wait: one descriptor for all the run's (stdout, stderr, stdin, the exit), level
    // triggered; what is closed leaves it.
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) {
      ended_ = true;
      if (settings_.report)
        settings_.report(settings_.who + ": cannot wait for its output: " + std::strerror(errno));
      return Stream::error;
    }
    add_to_epoll(child_.stdout_r.fd, EPOLLIN);
    add_to_epoll(child_.stderr_r.fd, EPOLLIN);
    add_to_epoll(child_.stdin_w.fd, EPOLLOUT);
    if (!exited_) add_to_epoll(child_.pidfd.fd, EPOLLIN);
    deadline_ = Clock::now() + settings_.timeout;  // from here on: the time without output
    term_at_ = deadline_ - term_grace(settings_.timeout);
  }
  auto fail = [&](const std::string& why) {
    ended_ = true;
    kill_group();
    finish();
    if (settings_.report)
      settings_.report(settings_.who + " " + why + ", " + std::to_string(body_sent_) +
                       " bytes into its body; the response was cut short" +
                       (result_.stderr_tail.empty() ? "" : "; stderr: " + result_.stderr_tail));
    return Stream::error;
  };
  auto past_limit = [&] { return settings_.max_output != 0 && printed_ > settings_.max_output; };
  auto fail_past_limit = [&] {
    return fail("printed more than " + std::to_string(settings_.max_output) + " bytes");
  };
  if (past_limit()) return fail_past_limit();  // seen with the head
  {
    std::optional<process::detail::SigpipeGuard> guard;
    if (child_.stdin_w.fd >= 0) guard.emplace();
    service_pipes();
  }
  const auto now = Clock::now();
  if (child_.stdout_r.fd >= 0) {
    ssize_t got;
    do {
      got = ::read(child_.stdout_r.fd, buffer, capacity);
    } while (got < 0 && errno == EINTR);
    if (got > 0) {
      printed_ += static_cast<std::uint64_t>(got);
      if (past_limit()) return fail_past_limit();
      last_data_ = now;
      deadline_ = now + settings_.timeout;
      term_at_ = deadline_ - term_grace(settings_.timeout);
      body_sent_ += static_cast<std::uint64_t>(got);
      return got;
    }
    if (got == 0) {
      child_.stdout_r.reset();  // closed: the body is complete (once it exits)
      eof_seen_ = now;
    }
  }
  if (termed_ && (exited_ || child_.stdout_r.fd < 0))
    return fail("timed out after " + process::detail::format_timeout(settings_.timeout) +
                " without printing");
  const bool complete =
      (child_.stdout_r.fd < 0 && exited_) ||  // the end; the destructor logs a failed exit
      // exited, and its stdout held open by a process that left its group
      (exited_ && now >= std::min(last_data_ + kDrainSilence, exit_seen_ + kDrainMax)) ||
      // closed its stdout and goes on: the body is complete all the same
      (child_.stdout_r.fd < 0 && now >= eof_seen_ + kDrainMax);
  if (complete) {
    // Reaped now, not when the server lets the stream go: its place in max_concurrent is free
    // by the time the client has the last byte.
    ended_ = true;
    kill_group();
    finish();
    if (result_.end == process::End::exited && result_.exit_status != 0 && settings_.log)
      settings_.log->warn(settings_.who + " " + process::describe(result_, settings_.timeout) +
                          " after a complete response, which was served");
    return Stream::end;
  }
  if (now >= deadline_)
    return fail("timed out after " + process::detail::format_timeout(settings_.timeout) +
                " without printing");
  if (!termed_ && now >= term_at_) {
    ::kill(-child_.pid, SIGTERM);  // its time without output is nearly up
    termed_ = true;
  }
  wait.fd = epoll_fd_;
  wait.until = termed_ ? deadline_ : std::min(deadline_, term_at_);
  if (exited_)
    wait.until = std::min({wait.until, last_data_ + kDrainSilence, exit_seen_ + kDrainMax});
  if (child_.stdout_r.fd < 0) wait.until = std::min(wait.until, eof_seen_ + kDrainMax);
  if (child_.pidfd.fd < 0 && !exited_) wait.until = std::min(wait.until, now + kExitCheckTick);
  return 0;
}

}  // namespace kiwi::cgi
