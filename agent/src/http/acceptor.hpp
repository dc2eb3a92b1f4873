// Accepting connections, ours rather than libmicrohttpd's: the listening socket, the thread that
// accepts on it, the hand-over of each connection to the worker with the fewest, the eviction of
// the connection idle the longest at max_connections, and the move of accepting from one set of
// workers to the next on a reload. The workers behind Worker are libmicrohttpd's
// (mhd_workers.hpp); nothing of libmicrohttpd here.
#pragma once

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/log.hpp"
#include "config/config.hpp"

namespace kiwi::agent::http {

// One open connection of a worker, from its event loop taking it up to its closing.
struct ConnectionSlot {
  // On the worker's thread, around each request: a connection being answered is never evicted.
  void request_started() { busy.store(true, std::memory_order_relaxed); }
  void request_done();

  int fd = -1;
  std::atomic<std::int64_t> idle_since{0};  // steady-clock ns: accepted, or last request done
  std::atomic<bool> busy{false};            // a request between on_request and on_completed
  bool evicted = false;                     // under the worker's mutex
  std::list<ConnectionSlot>::iterator self;
  // Its addresses as requests carry them, found once at NOTIFY_STARTED and read only by the
  // worker serving it: each request of a kept-alive connection would otherwise cost a
  // getsockname() and two inet_ntop() (sprintf), measured as ~3 % of a worker's time.
  std::string remote_address, local_address;
  std::uint16_t local_port = 0;
};

// The acceptor waits for a slot (Acceptor::wait_for_slot): the worker that closes a connection
// next wakes it. Owned by the server, so it outlives the acceptor and every worker.
struct SlotSignal {
  std::atomic<bool> wanted{false};
  int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  SlotSignal() {
    if (fd < 0)
      throw std::runtime_error(std::string("cannot start the HTTP acceptor: eventfd: ") +
                               std::strerror(errno));
  }
  ~SlotSignal() { ::close(fd); }
  SlotSignal(const SlotSignal&) = delete;
  SlotSignal& operator=(const SlotSignal&) = delete;
  // A worker, after counting a connection closed (seq_cst, like the acceptor's store of
  // `wanted` before it looks at the counts again: one of the two sees the other).
  void notify() {
    if (wanted.load() && wanted.exchange(false)) {
      const std::uint64_t one = 1;
      [[maybe_unused]] auto n = ::write(fd, &one, sizeof one);
    }
  }
};

// One worker as the acceptor sees it: a thread of its own with an event loop (an MHD daemon,
// MHD_USE_INTERNAL_POLLING_THREAD, no MHD thread pool: HttpWorker) and no listening socket. The
// acceptor hands it connections, never more than `limit` open at once: that keeps libmicrohttpd
// 0.9.75 off its own limit check in the worker, whose failure path returns with a mutex held
// (new_connection_process_) and deadlocks the worker. MHD's pool could not be kept off it: it
// picks the worker itself, by a count that leaves out connections still queued for the worker.
// Counting ours: a connection is open from its hand-over to MHD's NOTIFY_CLOSED, which the worker
// sends before it takes up the next ones.
//
// When every slot is taken, a newcomer does not simply lose: the acceptor closes (shutdown(2),
// which the worker sees as the peer leaving) the connection that has gone longest without
// finishing a request, if that is over kEvictIdle, and hands the newcomer over in its place. The
// oldest goes first, so under a flood of new connections a client still has the time the flood
// takes to fill every slot to send its request; kEvictIdle only spares one just accepted. A
// newcomer that finds no slot to take (every one answering or just opened, or the evicted ones
// not yet closed by their worker) is held by the acceptor, which accepts nothing more meanwhile,
// until a worker closes a connection (SlotSignal), for Acceptor::kHoldMax at most.
// libmicrohttpd restarts a connection's timeout on every byte it reads and has no deadline for a
// whole header block, so without this 300 clients sending one header byte a second (slowloris),
// or 1,000 idle keep-alive connections, would hold every slot and lock everyone else out. A
// connection that is being answered is never chosen. Until the worker reports a closed
// connection, it may hold up to kEvictHeadroom connections over its share (MHD's own limit
// allows for them).
constexpr std::uint64_t kEvictHeadroom = 16;          // connections over its share, see above
constexpr std::chrono::milliseconds kEvictIdle{100};  // spares a connection just accepted

struct Worker {
  Worker() = default;
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  virtual ~Worker() = default;

  // Gives the accepted connection `fd` (ours no longer) to the worker's event loop; false if it
  // refused it (it has closed the socket then, and logged why).
  virtual bool add_connection(int fd, const sockaddr* addr, socklen_t len) = 0;
  // Joins the worker's thread after closing every connection (the acceptor must no longer hand
  // it any). Idempotent.
  virtual void stop() = 0;

  // On the worker's thread, as its event loop takes up and closes a connection: the list the
  // acceptor evicts from, and the count it hands connections over by. `remote` and `local` are
  // the connection's addresses as requests carry them.
  ConnectionSlot& connection_started(int fd, std::string remote, std::string local,
                                     std::uint16_t local_port);
  void connection_closed(ConnectionSlot* slot);  // null: a connection that never started

  std::uint64_t open() const {
    return handed.load(std::memory_order_relaxed) - closed.load();  // seq_cst: SlotSignal
  }

  SlotSignal* freed = nullptr;             // the server's
  std::uint64_t limit = 0;                 // its share of max_connections
  std::atomic<std::uint64_t> handed{0};    // add_connection() said yes; under the acceptor's lock
  std::atomic<std::uint64_t> closed{0};    // connection_closed(), on the worker's thread
  std::atomic<std::uint64_t> evicting{0};  // shut down by the acceptor, connection_closed() to come
  std::mutex mutex;                        // guards `connections` and the slots' `evicted`
  std::list<ConnectionSlot> connections;
};

// One set of workers, which the acceptor hands connections to; a reload replaces it whole.
struct WorkerSet {
  std::vector<std::unique_ptr<Worker>> workers;

  // Whether a connection handed over is still open (or waiting for its worker).
  bool has_connections() const {
    for (auto& w : workers)
      if (w->open() != 0) return true;
    return false;
  }
  // Joins the workers after closing every connection (the acceptor must no longer hand it any).
  void shut_down() {
    for (auto& w : workers) w->stop();
  }
};

inline std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline void ConnectionSlot::request_done() {
  idle_since.store(steady_ns(), std::memory_order_relaxed);
  busy.store(false, std::memory_order_relaxed);
}

// Accepting, ours rather than MHD's: one thread ("kiwi-accept") waits on the listening socket
// with epoll, accepts until the backlog is empty and hands each connection to a worker of the
// current set (Worker::add_connection: MHD_add_connection). The workers run with
// MHD_USE_NO_LISTEN_SOCKET, so a reload moves the listening socket and the target between sets
// here, with no MHD_quiesce_daemon (which in 0.9.75 can abort the process with a thread pool: it
// and a waking worker both remove the listener from the worker's epoll set, and the loser panics).
//
// `mutex_` is taken by the thread for each batch of accepts and by switch_to(), so a switch
// happens between batches: once switch_to() returns, no connection goes to the old set, and
// the old listener is closed. Requests never take it; a new connection costs one accept4(), a
// look at each worker's count and one MHD_add_connection() (a lock of MHD's and a wake-up of the
// worker).
class Acceptor {
 public:
  Acceptor(Logger& log, SlotSignal& freed);
  ~Acceptor();
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;

  // Starts accepting on `listener` (ours from here on, also on failure) for `target`.
  void start(int listener, WorkerSet* target, const BindAddress& where);

  // From now on connections go to `target`. `listener` >= 0: a new listening socket (ours from
  // here on, also on failure) replaces the old one, which is closed once the connections already
  // in its backlog are handed to `target`, so the old address refuses from then on. Throws
  // std::runtime_error, having changed nothing, if `listener` cannot be watched.
  void switch_to(WorkerSet* target, int listener, const BindAddress& where);

  // Joins the thread and closes the listener: the address refuses from then on. Idempotent.
  void stop();

 private:
  static constexpr int kBatch = 64;              // accepts per lock, so a switch is never held up
  static constexpr int kMaxBacklog = SOMAXCONN;  // what a switch hands over from an old listener
  static constexpr auto kBackoff = std::chrono::milliseconds(100);
  // How long a connection that found every slot taken waits for one (see hold_); then it is closed
  // unanswered. Meanwhile the slots are looked at again whenever a worker closes a connection and
  // every kHoldRetry (a connection becomes evictable kEvictIdle after its last request).
  static constexpr auto kHoldMax = std::chrono::milliseconds(1000);
  static constexpr auto kHoldRetry = std::chrono::milliseconds(10);

  // full: a connection is held (hold_), none is accepted until it has a slot.
  enum class Outcome { drained, more, starved, failed, full };

  struct Accepted {
    int fd = -1;
    sockaddr_storage addr{};
    socklen_t len = 0;
    std::int64_t since = 0;  // steady-clock ns
  };

  void add_to_epoll(int listener, const BindAddress& where);

  void run();

  // Waits kBackoff, or less if stop() wakes us.
  void pause();

  // Waits until a worker closes a connection, kHoldRetry passes or stop() wakes us. The
  // listener is not watched meanwhile: new connections wait in the kernel's backlog.
  void wait_for_slot();

  // Hands `c` to a worker of `target` (making room by evict() if need be); false if none has a
  // slot for it now. On a false answer from MHD, MHD has closed the socket and logged why.
  bool place(WorkerSet& target, const Accepted& c);

  // Accepts up to `max` connections from `listener` and hands them to `target`. `err`: accept4's
  // errno on `starved` and `failed`.
  Outcome accept_batch(int listener, WorkerSet& target, int max, int& err);

  // The worker with the fewest open connections among those below their limit (ties taken in
  // turn), or null.
  Worker* pick(WorkerSet& d);

  // Every slot is taken: shuts down the connection of `d` idle the longest (see Worker), if
  // one has been for kEvictIdle, and returns its worker for the newcomer; else null. The slot's
  // descriptor is still open: MHD sends NOTIFY_CLOSED, which takes the same mutex, before it
  // closes it.
  Worker* evict(WorkerSet& d);

  void close_fds();

  Logger& log_;
  SlotSignal& freed_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;             // stop() writes it
  std::mutex mutex_;             // the thread holds it for each batch
  int listener_ = -1;            // guarded by mutex_ while the thread runs
  WorkerSet* target_ = nullptr;  // guarded by mutex_
  bool stopping_ = false;        // guarded by mutex_
  std::size_t turn_ = 0;         // guarded by mutex_: where pick() starts
  bool evict_logged_ = false;    // guarded by mutex_
  bool refuse_logged_ = false;   // guarded by mutex_
  // A connection accepted when no slot could take it, waiting for one (guarded by mutex_).
  Accepted held_;
  std::thread thread_;
};

}  // namespace kiwi::agent::http
