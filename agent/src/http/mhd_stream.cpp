#include "http/mhd_stream.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <thread>
#include <vector>

namespace kiwi::agent::http {

namespace {

using Clock = std::chrono::steady_clock;

// MHD's content reader: the stream's next bytes, or a suspended connection until there are some.
ssize_t read_body(void* cls, std::uint64_t, char* buffer, std::size_t capacity) {
  auto& b = *static_cast<StreamBody*>(cls);
  if (b.client_gone.load(std::memory_order_acquire)) return MHD_CONTENT_READER_END_WITH_ERROR;
  Stream::Wait wait;
  std::ptrdiff_t n = Stream::error;
  try {
    n = b.stream->read(buffer, capacity, wait);
  } catch (...) {
  }
  if (n > 0) return n;
  if (n == Stream::end) return MHD_CONTENT_READER_END_OF_STREAM;
  // Stream::error: cut short (MHD closes the connection without the last chunk, so the client
  // knows the body is incomplete).
  if (n != 0 || !b.waker->suspend(b, wait)) return MHD_CONTENT_READER_END_WITH_ERROR;
  return 0;  // suspended: called again once resumed
}

void free_body(void* cls) {
  delete static_cast<StreamBody*>(cls);
}

}  // namespace

StreamWaker::~StreamWaker() {
  {
    std::lock_guard lock(mutex_);
    quit_ = true;
    if (thread_.joinable()) wake_thread();
  }
  if (thread_.joinable()) thread_.join();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void StreamWaker::wake_thread() {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

bool StreamWaker::suspend(StreamBody& body, const Stream::Wait& wait) {
  std::lock_guard lock(mutex_);
  // Checked and suspended under the lock: stop_worker() either sees this entry and resumes it, or
  // ran before and is seen here; a connection is never left suspended when MHD stops.
  if (quit_ || stopped_.count(body.worker)) return false;
  if (!thread_.joinable()) {
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0) return false;
    try {
      thread_ = std::thread([this] { run(); });
    } catch (...) {
      ::close(wake_fd_);
      wake_fd_ = -1;
      return false;
    }
  }
  body.api->suspend_connection(body.connection);
  entries_.push_back({next_id_++, &body, wait.fd, wait.until});
  wake_thread();
  return true;
}

void StreamWaker::stop_worker(MHD_Daemon* worker) {
  std::lock_guard lock(mutex_);
  stopped_.insert(worker);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->body->worker != worker) {
      ++it;
      continue;
    }
    it->body->client_gone.store(true, std::memory_order_release);  // the reader ends it
    it->body->api->resume_connection(it->body->connection);
    it = entries_.erase(it);
  }
}

std::size_t StreamWaker::waiting() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

void StreamWaker::run() {
  std::vector<pollfd> fds;
  std::vector<std::uint64_t> ids;  // the entry each pair of fds[1..] is for
  for (;;) {
    Clock::time_point next = Clock::time_point::max();
    {
      std::lock_guard lock(mutex_);
      if (quit_) return;
      fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
      ids.clear();
      for (const Entry& e : entries_) {
        // The stream's descriptor (-1 is skipped by poll), and the client's socket for a hang-up.
        fds.push_back({e.fd, POLLIN, 0});
        fds.push_back({e.body->client_fd, POLLRDHUP, 0});
        ids.push_back(e.id);
        next = std::min(next, e.until);
      }
    }
    int timeout = -1;
    if (next != Clock::time_point::max()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now()).count();
      timeout = static_cast<int>(std::clamp<long long>(left, 0, INT_MAX));
    }
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // then try again
    if (fds[0].revents) {
      std::uint64_t count;
      [[maybe_unused]] const ssize_t n = ::read(wake_fd_, &count, sizeof count);
    }
    const auto now = Clock::now();
    std::lock_guard lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      // Its place in this round's fds (an entry added since has none yet: next round).
      const auto at = std::find(ids.begin(), ids.end(), it->id);
      const bool polled = at != ids.end();
      const std::size_t i = 1 + 2 * static_cast<std::size_t>(at - ids.begin());
      const bool ready = polled && fds[i].revents != 0;
      const bool gone =
          polled && (fds[i + 1].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
      if (!ready && !gone && now < it->until) {
        ++it;
        continue;
      }
      if (gone) it->body->client_gone.store(true, std::memory_order_release);
      it->body->api->resume_connection(it->body->connection);
      it = entries_.erase(it);
    }
  }
}

MHD_Response* make_stream_response(const MhdApi& mhd, Response& r, std::shared_ptr<const void> keep,
                                   MHD_Connection* c, StreamWaker& waker, bool close, bool head) {
  auto body = std::make_unique<StreamBody>();
  body->keep = std::move(keep);
  body->stream = std::move(r.stream);
  if (head) body->stream.reset();  // never read: let its producer go now
  body->api = &mhd;
  body->connection = c;
  body->waker = &waker;
  if (const MHD_ConnectionInfo* info = mhd.get_connection_info(c, MHD_CONNECTION_INFO_DAEMON))
    body->worker = info->daemon;
  if (const MHD_ConnectionInfo* info =
          mhd.get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD))
    body->client_fd = info->connect_fd;
  // MHD's block size is for HTTP/1.0 (a buffer in the response); chunked bodies are read straight
  // into the connection's write buffer.
  MHD_Response* res = mhd.create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, &read_body,
                                                        body.get(), &free_body);
  if (!res) return nullptr;  // `body` goes: the stream is released
  body.release();            // MHD's now: free_body when the response is destroyed
  if (!r.content_type.empty()) mhd.add_response_header(res, "Content-Type", r.content_type.c_str());
  for (auto& h : r.headers) mhd.add_response_header(res, h.name.c_str(), h.value.c_str());
  if (close) mhd.add_response_header(res, "Connection", "close");
  if (head) mhd.set_response_options(res, MHD_RF_HTTP_1_0_COMPATIBLE_STRICT, MHD_RO_END);
  return res;
}

}  // namespace kiwi::agent::http
