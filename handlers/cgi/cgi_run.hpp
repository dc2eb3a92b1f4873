// One CGI program run for one request: started, read until its header block is complete (the
// handler's call waits for that, under the run's deadline), then its body read as it comes by the
// server, without blocking (a kiwi::Stream, ABI 1.4), so a body of any size passes through a
// bounded buffer and a slow program holds up its own client only.
//
// How it ends:
//   - Before the header block is complete: as kiwi::process::run() ends a run (the deadline, with
//     SIGTERM a little before and SIGKILL to the group at it; the group killed when the program
//     exits; what is left in the pipes read for at most 100 ms after), and the handler answers
//     502 or 504 from what it printed.
//   - After: the body ends when the program closes its stdout (or exits and its pipe is drained,
//     as above): Stream::end. A program that prints nothing for `timeout` while its client waits
//     (a stall, or a program that lingers after its response) is killed with its group, logged,
//     and the body cut short (Stream::error); so is one past max_output.
//   - Whenever the server lets the stream go (the client went away, HEAD, the server stops), the
//     group is killed and the program reaped. Nothing of the run outlives the stream.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <kiwi/handler.hpp>
#include <kiwi/process.hpp>
#include <memory>
#include <string>

namespace kiwi::cgi {

// The most a header block may take: a program whose first kMaxHeaderBytes hold no end of one is
// not printing a CGI response (Apache's limit is 8190 bytes a line and 100 lines).
inline constexpr std::size_t kMaxHeaderBytes = 64 * 1024;

// Where the header block of `output` ends (the offset after its empty line), or npos while it has
// none yet. Lines end with LF or CRLF, as parse_response() reads them.
std::size_t header_block_end(std::string_view output);

class Run {
 public:
  using Clock = std::chrono::steady_clock;
  // What a run logs once the server has the response: `log(detail)` logs at warn under a new
  // request id (the handler's).
  using Report = std::function<void(const std::string& detail)>;

  struct Settings {
    std::string who;  // "CGI program 'x'", for messages
    std::chrono::milliseconds timeout{10000};
    std::uint64_t max_output = 0;  // bytes of headers and body; 0: no limit
    Report report;
    Logger* log = nullptr;  // for the debug line of a run the server let go early
  };

  // How the header phase ended.
  enum class Head {
    complete,          // the header block is in output(); the body follows (body_start())
    ended,             // the program ended first: output() is all it printed
    timed_out,         // no complete header block by the deadline (group killed)
    output_exceeded,   // past max_output before the header block ended (group killed)
    header_too_large,  // kMaxHeaderBytes without the end of a header block (group killed)
    spawn_failed,      // error() says why
  };

  explicit Run(Settings settings);
  ~Run();  // kills the group (if it still runs) and reaps the program
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  // Starts the program and waits until its header block is complete, it ends, or its time is up.
  // `keep_reading`: while the header block has no Content-Type, reading goes on until a body
  // byte or the end (the response is then known to be malformed or bodiless, as before).
  Head start_and_read_head(const process::Spec& spec);

  const std::string& output() const { return output_; }
  std::size_t body_start() const { return body_start_; }
  // After Head::ended: how the program ended (process::Result's end, exit_status, signal) and
  // the last lines of its stderr.
  const process::Result& result() const { return result_; }
  const std::string& error() const { return result_.error; }

  // After Head::complete, when no body will be asked for (the header block is malformed): the
  // release kills the program without a note in the log.
  void discard() { ended_ = true; }

  // The body, after Head::complete: what output() holds past body_start() first, then what the
  // program prints. Never blocks (Stream's contract).
  std::ptrdiff_t read_body(char* buffer, std::size_t capacity, Stream::Wait& wait);

 private:
  bool child_exited();
  void kill_group();
  void service_pipes();  // feeds stdin, keeps the stderr tail, notes the exit
  void finish();         // reaps the program and fills result_
  void add_to_epoll(int fd, std::uint32_t events);

  Settings settings_;
  process::Child child_;
  std::string input_;  // the request body, copied: the request is gone after the handler call
  std::size_t input_done_ = 0;
  process::detail::StderrTail tail_;
  process::Result result_;
  std::string output_;
  std::size_t body_start_ = 0;
  std::size_t prefix_sent_ = 0;  // of output_ past body_start_
  std::uint64_t printed_ = 0;    // stdout bytes in all
  std::uint64_t body_sent_ = 0;  // body bytes handed to the server
  Clock::time_point deadline_;   // header phase: from the start; body: from the last output
  Clock::time_point term_at_ = Clock::time_point::max();
  Clock::time_point exit_seen_{};
  Clock::time_point last_data_{};
  bool exited_ = false;           // the program is a zombie (its pid stays ours until reaped)
  bool killed_ = false;           // the group was killed
  bool termed_ = false;           // the group got SIGTERM
  bool finished_ = false;         // reaped
  bool ended_ = false;            // the body ended (end or error), or was discarded: no debug line
  Clock::time_point eof_seen_{};  // when its stdout closed
  int epoll_fd_ = -1;             // what read_body() waits on: stdout, stderr, stdin, the pidfd
};

// A Run as the body of a response; holds what must live as long as the program runs (the
// handler's place in max_concurrent).
class RunStream final : public Stream {
 public:
  RunStream(std::unique_ptr<Run> run, std::shared_ptr<void> hold)
      : hold_(std::move(hold)), run_(std::move(run)) {}
  std::ptrdiff_t read(char* buffer, std::size_t capacity, Wait& wait) override {
    const std::ptrdiff_t n = run_->read_body(buffer, capacity, wait);
    // The program is reaped by now: its place is free before the server sends the last chunk,
    // so a client's next request right after this one is not refused.
    if (n == end || n == error) hold_.reset();
    return n;
  }

 private:
  std::shared_ptr<void> hold_;  // released after the run (declared first)
  std::unique_ptr<Run> run_;
};

}  // namespace kiwi::cgi
