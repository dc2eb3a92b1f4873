// Streamed response bodies (kiwi::Stream, ABI 1.4) on libmicrohttpd: a response whose content
// reader asks the stream for the next bytes, and a thread that wakes the connections waiting on a
// stream.
//
// A worker thread of MHD serves many connections, so a content reader must never block. When a
// stream has nothing yet (a CGI program that has not written more), the reader suspends the
// connection (MHD_suspend_connection: MHD then leaves it out of its event loop) and hands what the
// stream waits for (a descriptor, a time) to the StreamWaker, whose thread polls all of them and
// resumes each connection once its descriptor is readable, its time has come or its client hung
// up (MHD does not notice a hang-up on a suspended connection; the waker polls the socket for it).
// MHD then calls the reader again. So a slow program holds up its own client only.
//
// MHD 0.9.75 must not be stopped with a connection suspended (it aborts the process):
// stop_worker() resumes every connection a worker has waiting, and refuses any more, before
// HttpWorker::stop() stops it.
#pragma once

#include <microhttpd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <kiwi/handler.hpp>
#include <list>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "http/mhd_api.hpp"

namespace kiwi::agent::http {

class StreamWaker;

// What a streamed MHD response holds: the stream, and what must outlive it (the handler
// instance that made it: ABI 1.4 releases every stream before the instance's destroy()).
struct StreamBody {
  std::shared_ptr<const void> keep;
  std::shared_ptr<Stream> stream;  // after `keep`: released first
  const MhdApi* api = nullptr;
  MHD_Connection* connection = nullptr;
  MHD_Daemon* worker = nullptr;  // the connection's MHD daemon
  int client_fd = -1;
  StreamWaker* waker = nullptr;
  std::atomic<bool> client_gone{false};  // the waker saw the client hang up
};

class StreamWaker {
 public:
  StreamWaker() = default;
  ~StreamWaker();
  StreamWaker(const StreamWaker&) = delete;
  StreamWaker& operator=(const StreamWaker&) = delete;

  // On the connection's worker thread, in its content reader: suspends the connection and resumes
  // it once `wait` comes or the client hangs up. False (nothing suspended) once stop_worker() ran
  // for its worker: the reader then ends the response.
  bool suspend(StreamBody& body, const Stream::Wait& wait);
  // Resumes every connection of `worker` that waits here, and refuses any more from it. Before
  // MHD_stop_daemon(worker); from any thread.
  void stop_worker(MHD_Daemon* worker);
  // Connections waiting now (for tests and the log).
  std::size_t waiting() const;

 private:
  struct Entry {
    std::uint64_t id;
    StreamBody* body;
    int fd;
    std::chrono::steady_clock::time_point until;
  };
  void run();
  void wake_thread();  // under mutex_

  mutable std::mutex mutex_;
  std::list<Entry> entries_;       // guarded by mutex_
  std::set<MHD_Daemon*> stopped_;  // guarded by mutex_
  std::uint64_t next_id_ = 0;      // guarded by mutex_
  bool quit_ = false;              // guarded by mutex_
  int wake_fd_ = -1;               // an eventfd; made with the thread
  std::thread thread_;             // started by the first suspend()
};

// A response whose body is `r.stream`, read as the connection can take it (chunked to HTTP/1.1
// clients), with r's type and headers; `keep` is held until the stream is released. Queue it once
// on `c` and destroy it (MHD keeps it until the connection is done with it). Null on failure (the
// stream is then released). `head`: the stream is released at once, and the connection closed
// after the headers (MHD 0.9.75 would send a chunked body's last chunk after a HEAD answer, which
// a client would read as the start of the next response; without chunked encoding, the end of
// a body of unknown length is the connection's).
MHD_Response* make_stream_response(const MhdApi& mhd, Response& r, std::shared_ptr<const void> keep,
                                   MHD_Connection* c, StreamWaker& waker, bool close, bool head);

}  // namespace kiwi::agent::http
