#include "http/http_server.hpp"

#include "base/compress.hpp"
#include "http/mhd_api.hpp"
#include "http/sockets.hpp"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstring>
#include <list>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace kiwi::agent {

namespace detail {

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
struct ConnectionSlot {  // one open connection, from NOTIFY_STARTED to NOTIFY_CLOSED
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

// The acceptor waits for a slot (Acceptor::hold): the worker that closes a connection next wakes
// it. Owned by the server, so it outlives the acceptor and every worker.
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

constexpr std::uint64_t kEvictHeadroom = 16;
constexpr std::chrono::milliseconds kEvictIdle{100};

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void ConnectionSlot::request_done() {
  idle_since.store(steady_ns(), std::memory_order_relaxed);
  busy.store(false, std::memory_order_relaxed);
}

ConnectionSlot& Worker::connection_started(int fd, std::string remote, std::string local,
                                           std::uint16_t local_port) {
  std::lock_guard lock(mutex);
  auto& slot = connections.emplace_back();
  slot.fd = fd;
  slot.remote_address = std::move(remote);
  slot.local_address = std::move(local);
  slot.local_port = local_port;
  slot.idle_since.store(steady_ns(), std::memory_order_relaxed);
  slot.self = std::prev(connections.end());
  return slot;
}

void Worker::connection_closed(ConnectionSlot* slot) {
  if (slot) {
    std::lock_guard lock(mutex);
    if (slot->evicted) evicting.fetch_sub(1);
    connections.erase(slot->self);
  }
  closed.fetch_add(1);  // seq_cst: see SlotSignal::notify
  freed->notify();
}

// A worker of libmicrohttpd: an MHD daemon with no listening socket.
struct HttpWorker final : Worker {
  const MhdApi* api = nullptr;  // its daemon's library (HttpDaemon::api)
  MHD_Daemon* mhd = nullptr;

  ~HttpWorker() override { stop(); }
  bool add_connection(int fd, const sockaddr* addr, socklen_t len) override {
    return api->add_connection(mhd, fd, addr, len) == MHD_YES;
  }
  void stop() override {
    if (mhd) api->stop_daemon(mhd);
    mhd = nullptr;
  }
};

// One set of workers with its settings and what is in flight on it; on_request gets it as its
// closure. It owns no socket: the Acceptor hands it connections. A set that a reconfigure()
// replaced drains on its own thread (`retirer`).
struct HttpDaemon : WorkerSet {
  const std::atomic<std::shared_ptr<const HttpServer::Published>>* published = nullptr;
  Logger* log = nullptr;
  GzipCache* gzip = nullptr;              // the server's, shared by every set of workers
  AuthLimiter* auth_limiter = nullptr;    // the server's
  AuthCounters* auth_counters = nullptr;  // the server's
  HttpSettings settings;  // cors_origins unused: requests read them from `published`
  // The libmicrohttpd of this set: the linked one, or the TLS one for [http.tls]. Everything of
  // the set (daemons, connections, responses) is made and handled by it alone.
  const MhdApi* api = &linked_mhd();
  std::atomic<bool> draining{false};  // replaced: answer with "Connection: close"
  std::atomic<int> in_flight{0};      // requests between their first and completion callbacks
  std::atomic<bool> hurry{false};     // stop(): wait for requests in flight only, not connections
  std::atomic<bool> done{false};      // the retirer has stopped it
  std::thread retirer;

  HttpDaemon() = default;
  HttpDaemon(const HttpDaemon&) = delete;
  HttpDaemon& operator=(const HttpDaemon&) = delete;
  ~HttpDaemon() {
    if (retirer.joinable()) {
      hurry.store(true);
      retirer.join();
    }
    shut_down();
  }
};

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
  Acceptor(Logger& log, SlotSignal& freed) : log_(log), freed_(freed) {
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (epoll_fd_ < 0 || wake_fd_ < 0) {
      const int err = errno;
      close_fds();
      throw std::runtime_error(std::string("cannot start the HTTP acceptor: ") +
                               std::strerror(err));
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = wake_fd_;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
      const int err = errno;
      close_fds();
      throw std::runtime_error(std::string("cannot start the HTTP acceptor: ") +
                               std::strerror(err));
    }
  }
  ~Acceptor() {
    stop();
    if (held_.fd >= 0) ::close(held_.fd);
    close_fds();
  }
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;

  // Starts accepting on `listener` (ours from here on, also on failure) for `target`.
  void start(int listener, WorkerSet* target, const BindAddress& where) {
    listener_ = listener;
    add_to_epoll(listener, where);
    target_ = target;
    thread_ = std::thread([this] { run(); });
  }

  // From now on connections go to `target`. `listener` >= 0: a new listening socket (ours from
  // here on, also on failure) replaces the old one, which is closed once the connections already
  // in its backlog are handed to `target`, so the old address refuses from then on. Throws
  // std::runtime_error, having changed nothing, if `listener` cannot be watched.
  void switch_to(WorkerSet* target, int listener, const BindAddress& where) {
    std::lock_guard lock(mutex_);
    if (listener >= 0) {
      add_to_epoll(listener, where);  // the only step that fails: first
      const int old = std::exchange(listener_, listener);
      int err = 0;
      accept_batch(old, *target, kMaxBacklog, err);
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, old, nullptr);
      ::close(old);
    }
    target_ = target;
  }

  // Joins the thread and closes the listener: the address refuses from then on. Idempotent.
  void stop() {
    if (thread_.joinable()) {
      {
        std::lock_guard lock(mutex_);
        stopping_ = true;
      }
      const std::uint64_t one = 1;
      [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof one);
      thread_.join();
    }
    if (listener_ >= 0) ::close(listener_);
    listener_ = -1;
  }

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

  void add_to_epoll(int listener, const BindAddress& where) {
    epoll_event ev{};
    ev.events = EPOLLIN;  // level-triggered: a batch that stops early is woken again
    ev.data.fd = listener;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listener, &ev) != 0) {
      const int err = errno;
      if (listener != listener_) ::close(listener);
      throw std::runtime_error("cannot listen on " + where.str() +
                               ": epoll_ctl: " + std::strerror(err));
    }
  }

  void run() {
    ::pthread_setname_np(::pthread_self(), "kiwi-accept");
    bool starved_logged = false;
    bool full = false;  // a connection is held: look at the slots again, with no event needed
    for (;;) {
      epoll_event events[2];
      if (!full && ::epoll_wait(epoll_fd_, events, 2, -1) < 0 && errno != EINTR) {
        log_.warn(std::string("http: epoll_wait: ") + std::strerror(errno));
        pause();
        continue;
      }
      Outcome outcome;
      int err = 0;
      {
        std::lock_guard lock(mutex_);
        if (stopping_) return;
        // Whatever woke us (the listener, or an event of a listener replaced meanwhile): accept
        // from the current one; an empty backlog only costs an EAGAIN.
        outcome = accept_batch(listener_, *target_, kBatch, err);
      }
      full = outcome == Outcome::full;
      if (full) {
        wait_for_slot();
      } else if (outcome == Outcome::starved) {
        // Out of descriptors or memory: the connection stays in the backlog and the listener
        // stays readable, so retrying at once would spin. Some are freed as connections close.
        if (!starved_logged)
          log_.warn(std::string("http: cannot accept connections: ") + std::strerror(err) +
                    "; retrying every 100 ms");
        starved_logged = true;
        pause();
      } else if (outcome == Outcome::failed) {
        log_.warn(std::string("http: accept: ") + std::strerror(err));
        pause();
      } else {
        starved_logged = false;
      }
    }
  }

  // Waits kBackoff, or less if stop() wakes us.
  void pause() {
    pollfd p{wake_fd_, POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(kBackoff.count()));
  }

  // Waits until a worker closes a connection, kHoldRetry passes or stop() wakes us. The
  // listener is not watched meanwhile: new connections wait in the kernel's backlog.
  void wait_for_slot() {
    pollfd p[2] = {{wake_fd_, POLLIN, 0}, {freed_.fd, POLLIN, 0}};
    if (::poll(p, 2, static_cast<int>(kHoldRetry.count())) > 0 && (p[1].revents & POLLIN)) {
      std::uint64_t n;
      [[maybe_unused]] auto r = ::read(freed_.fd, &n, sizeof n);
    }
  }

  // Hands `c` to a worker of `target` (making room by evict() if need be); false if none has a
  // slot for it now. On a false answer from MHD, MHD has closed the socket and logged why.
  bool place(WorkerSet& target, const Accepted& c) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      Worker* w = pick(target);
      if (!w) w = evict(target);
      if (w) {
        if (w->add_connection(c.fd, reinterpret_cast<const sockaddr*>(&c.addr), c.len))
          w->handed.fetch_add(1, std::memory_order_relaxed);
        return true;
      }
      // Ask the workers to say when one closes, then look once more: a close between the
      // first look and the request would otherwise go unnoticed until kHoldRetry.
      if (attempt == 0) freed_.wanted.store(true);
    }
    return false;
  }

  // Accepts up to `max` connections from `listener` and hands them to `target`. `err`: accept4's
  // errno on `starved` and `failed`.
  Outcome accept_batch(int listener, WorkerSet& target, int max, int& err) {
    if (held_.fd >= 0) {
      if (!place(target, held_)) {
        if (steady_ns() - held_.since <
            std::chrono::duration_cast<std::chrono::nanoseconds>(kHoldMax).count())
          return Outcome::full;
        ::close(held_.fd);  // waited kHoldMax: refused (closed unanswered)
        if (!refuse_logged_)
          log_.warn(
              "http: a connection waited 1 s for a slot (http.max_connections) with every "
              "slot answering or just opened, and was closed unanswered (logged once)");
        refuse_logged_ = true;
      }
      held_.fd = -1;
    }
    for (int i = 0; i < max; ++i) {
      sockaddr_storage addr{};
      socklen_t len = sizeof addr;
      const int fd = ::accept4(listener, reinterpret_cast<sockaddr*>(&addr), &len,
                               SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        err = errno;
        switch (err) {
          case EAGAIN:
            return Outcome::drained;
          case EINTR:
          case ECONNABORTED:  // the client gave up while queued
          case EPROTO:        // Linux passes on network errors of the new socket: try the next
          case ENETDOWN:
          case ENOPROTOOPT:
          case EHOSTDOWN:
          case ENONET:
          case EHOSTUNREACH:
          case EOPNOTSUPP:
          case ENETUNREACH:
          case EPERM:  // a firewall rule
            continue;
          case EMFILE:
          case ENFILE:
          case ENOBUFS:
          case ENOMEM:
            return Outcome::starved;
          default:
            return Outcome::failed;
        }
      }
      const Accepted c{fd, addr, len, steady_ns()};
      if (!place(target, c)) {  // every slot answering, just opened or not yet closed: wait
        held_ = c;
        return Outcome::full;
      }
    }
    return Outcome::more;
  }

  // The worker with the fewest open connections among those below their limit (ties taken in
  // turn), or null.
  Worker* pick(WorkerSet& d) {
    const std::size_t n = d.workers.size();
    Worker* best = nullptr;
    std::uint64_t fewest = 0;
    ++turn_;
    for (std::size_t i = 0; i < n; ++i) {
      Worker* w = d.workers[(turn_ + i) % n].get();
      const std::uint64_t open = w->open();
      const std::uint64_t counted = open - std::min(open, w->evicting.load());
      if (counted < w->limit && open < w->limit + kEvictHeadroom && (!best || open < fewest)) {
        best = w;
        fewest = open;
      }
    }
    return best;
  }

  // Every slot is taken: shuts down the connection of `d` idle the longest (see Worker), if
  // one has been for kEvictIdle, and returns its worker for the newcomer; else null. The slot's
  // descriptor is still open: MHD sends NOTIFY_CLOSED, which takes the same mutex, before it
  // closes it.
  Worker* evict(WorkerSet& d) {
    const std::int64_t cutoff =
        steady_ns() - std::chrono::duration_cast<std::chrono::nanoseconds>(kEvictIdle).count();
    // Every worker's list at once (only this thread takes more than one), so the oldest of all
    // is chosen and stays open until it is shut down.
    std::vector<std::unique_lock<std::mutex>> locks;
    locks.reserve(d.workers.size());
    Worker* chosen = nullptr;
    ConnectionSlot* victim = nullptr;
    for (auto& w : d.workers) {
      if (w->open() >= w->limit + kEvictHeadroom) continue;
      locks.emplace_back(w->mutex);
      for (auto& c : w->connections) {
        if (c.evicted || c.busy.load(std::memory_order_relaxed)) continue;
        const std::int64_t since = c.idle_since.load(std::memory_order_relaxed);
        if (since <= cutoff && (!victim || since < victim->idle_since.load())) {
          victim = &c;
          chosen = w.get();
        }
      }
    }
    if (victim) {
      victim->evicted = true;
      chosen->evicting.fetch_add(1);
      ::shutdown(victim->fd, SHUT_RDWR);
    }
    locks.clear();
    if (chosen && !evict_logged_) {
      log_.warn(
          "http: every connection slot (http.max_connections) was taken; closing the "
          "connections idle the longest to make room (logged once)");
      evict_logged_ = true;
    }
    return chosen;
  }

  void close_fds() {
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
    if (wake_fd_ >= 0) ::close(wake_fd_);
    epoll_fd_ = wake_fd_ = -1;
  }

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

}  // namespace detail

namespace {

using detail::ConnectionSlot;
using detail::HttpDaemon;
using detail::HttpWorker;

// Per-request state between MHD's calls, from the request line (on_uri) to on_completed. A request
// whose target has no '%' and no '?' and that has no body (nearly every GET/HEAD) uses the shared
// markers and allocates nothing; any other allocates a RequestState.
char uri_marker;         // the request line was read; on_request has not run yet
char first_call_marker;  // on_request has run: the request is in flight

struct RequestState {
  // The request-target as sent, kept when MHD's decoding changes it (a '%' or a '?' in it): MHD
  // decodes the path and the query in place after on_uri, and CGI wants the raw query.
  std::string target;
  std::string data;  // the body
  bool too_large = false;
  bool started = false;  // on_request has run
};

// The connection's entry in its worker's list (set at NOTIFY_STARTED), or null.
ConnectionSlot* slot_of(const MhdApi& mhd, MHD_Connection* c) {
  const MHD_ConnectionInfo* info = mhd.get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return info ? static_cast<ConnectionSlot*>(info->socket_context) : nullptr;
}

RequestState* state_of(void* state) {
  return state == nullptr || state == &uri_marker || state == &first_call_marker
             ? nullptr
             : static_cast<RequestState*>(state);
}

// MHD_OPTION_URI_LOG_CALLBACK: the request-target before MHD decodes it; the value returned is the
// request's first *state.
void* on_uri(void*, const char* uri, MHD_Connection*) {
  if (!std::strpbrk(uri, "%?")) return &uri_marker;
  auto* st = new RequestState;
  st->target = uri;
  return st;
}

MHD_Result collect(void* cls, MHD_ValueKind, const char* key, const char* value) {
  auto* out = static_cast<std::vector<Param>*>(cls);
  out->push_back({key ? key : "", value ? value : ""});
  return MHD_YES;
}

// What an MHD response keeps alive: its body, and the code of the plugin that made it. A body a
// handler made may be freed through that plugin's code (its shared_ptr control block), and an MHD
// response can outlive the router it came from (a worker's cache, a slow connection), so the
// library stays loaded until the body is gone. `body` is declared last and goes first.
struct KeptBody {
  std::shared_ptr<LoadedLibrary> code;
  Body body;
};

void free_body(void* cls) {
  delete static_cast<KeptBody*>(cls);
}

// Whether `r` has a header named `name` (ASCII case-insensitive).
bool has_header(const Response& r, std::string_view name) {
  for (const auto& h : r.headers)
    if (h.name.size() == name.size() &&
        std::equal(name.begin(), name.end(), h.name.begin(),
                   [](char a, char b) { return (a | 0x20) == (b | 0x20); }))
      return true;
  return false;
}

// Whether the server chooses the encoding of `r` (gzip or identity by Accept-Encoding): a textual
// type, not encoded by the handler itself (a CGI program may send its own Content-Encoding).
bool negotiates_encoding(const Response& r) {
  return compressible_type(r.content_type) && !has_header(r, "Content-Encoding");
}

// Whether `r` goes out gzip-compressed to a client that accepts gzip (unless it does not shrink).
bool gzip_candidate(const Response& r) {
  return r.body && r.body->size() >= kGzipMinBytes && negotiates_encoding(r);
}

// The gzip of r.body, or null (incompressible, or zlib failed: sent plain then). A response with an
// ETag is a version served again: its gzip is made once and kept by body identity; any other is
// compressed for this request only, at the fastest level.
Body gzip_of(const Response& r, GzipCache& cache, const std::shared_ptr<LoadedLibrary>* code) {
  try {
    if (has_header(r, "ETag")) return cache.get(r.body, code ? *code : nullptr);
    auto gz = std::make_shared<const std::string>(gzip(*r.body, kGzipPerRequestLevel));
    if (gz->size() < r.body->size()) return gz;
  } catch (const std::exception&) {
  }
  return nullptr;
}

MHD_Response* build_response(const MhdApi& mhd, const Body& chosen, const Response& r, bool gzip,
                             bool close, const std::shared_ptr<LoadedLibrary>* code) {
  const std::string_view data = chosen ? *chosen : std::string_view();
  // Zero-copy: MHD reads the shared body in place; the callback drops our reference when done.
  auto* keep = new KeptBody{code ? *code : nullptr, chosen};
  MHD_Response* res =
      mhd.create_response(data.size(), const_cast<char*>(data.data()), &free_body, keep);
  if (!res) {
    delete keep;
    return nullptr;
  }
  if (!r.content_type.empty()) mhd.add_response_header(res, "Content-Type", r.content_type.c_str());
  // On the identity response too (and on small bodies of such a type, which may grow past the
  // threshold in a later version), so that a shared cache keeps the two apart.
  if (negotiates_encoding(r)) mhd.add_response_header(res, "Vary", "Accept-Encoding");
  if (gzip) mhd.add_response_header(res, "Content-Encoding", "gzip");
  for (auto& h : r.headers) mhd.add_response_header(res, h.name.c_str(), h.value.c_str());
  // MHD then closes the connection once the response is sent.
  if (close) mhd.add_response_header(res, "Connection", "close");
  return res;
}

// The MHD response a worker made last, reused while its answers stay the same: the same body
// (by identity: the cached page, snapshot, history window or /metrics text of the current
// second), the same choice of gzip, type and headers. MHD counts the references to a response,
// so one object may be queued on many connections at once (the ceiling server serves every
// request so). Building one costs some 15 allocations (the response, each header's name and
// value) and a look into the gzip cache (a lock shared by the workers); reusing it costs a few
// comparisons. It keeps the handler's body alive, so that body's address cannot be reused while
// cached, and the body's plugin code loaded (`code`, released after `source`), so the cache stays
// valid across routers. A worker belongs to one daemon, whose responses carry
// "Connection: close" once it is replaced: that is part of the match, and so is its library.
struct LastResponse {
  const MhdApi* api = nullptr;  // the library that made `response`
  MHD_Response* response = nullptr;
  std::shared_ptr<LoadedLibrary> code;
  Body source;  // the handler's body, which `response` sends as it is or compressed
  bool gzip_wanted = false;
  bool close = false;
  std::string content_type;
  std::vector<Header> headers;

  bool matches(const MhdApi* mhd, const Response& r, bool gz, bool cl) const {
    if (!response || mhd != api || r.body.identity() != source.identity() ||
        r.body->size() != source->size() || gz != gzip_wanted || cl != close ||
        r.content_type != content_type || r.headers.size() != headers.size())
      return false;
    for (std::size_t i = 0; i < headers.size(); ++i)
      if (r.headers[i].name != headers[i].name || r.headers[i].value != headers[i].value)
        return false;
    return true;
  }
  ~LastResponse() {
    if (response) api->destroy_response(response);
  }
};

// The response for `r`, owned by the calling worker's cache: queue it, do not destroy it. `code`:
// the library of the handler that made `r` (null for the server's own answers).
MHD_Response* make_response(const MhdApi& mhd, const Response& r, bool accepts_gzip, bool close,
                            GzipCache& cache, const std::shared_ptr<LoadedLibrary>* code) {
  thread_local LastResponse last;
  const bool gzip_wanted = accepts_gzip && gzip_candidate(r);
  if (last.matches(&mhd, r, gzip_wanted, close)) return last.response;
  Body gz = gzip_wanted ? gzip_of(r, cache, code) : nullptr;
  MHD_Response* res = build_response(mhd, gz ? gz : r.body, r, gz != nullptr, close, code);
  if (!res) return nullptr;
  if (last.response) last.api->destroy_response(last.response);  // freed once no connection uses it
  last.api = &mhd;
  last.response = res;
  last.source = r.body;  // before `code`: the old body goes while its code is still loaded
  last.code = code ? *code : nullptr;
  last.gzip_wanted = gzip_wanted;
  last.close = close;
  last.content_type = r.content_type;
  last.headers = r.headers;
  return res;
}

std::string client_address(const MhdApi& mhd, MHD_Connection* c) {
  const MHD_ConnectionInfo* info = mhd.get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (!info || !info->client_addr) return {};
  char buf[INET6_ADDRSTRLEN] = {};
  const sockaddr* sa = info->client_addr;
  if (sa->sa_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  else if (sa->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  return buf;
}

// The address and port the connection came in on ("127.0.0.1", "::1"); {"", 0} if unknown.
std::pair<std::string, std::uint16_t> local_address(const MhdApi& mhd, MHD_Connection* c) {
  const MHD_ConnectionInfo* info = mhd.get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (!info || ::getsockname(info->connect_fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return {};
  char buf[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    return {buf, ntohs(a->sin_port)};
  }
  if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    return {buf, ntohs(a->sin6_port)};
  }
  return {};
}

// CORS is off unless [http] cors_origins lists the exact origin; there is no wildcard.
bool origin_allowed(const std::vector<std::string>& cors_origins, const Request& req) {
  auto origin = req.header("Origin");
  if (!origin) return false;
  for (auto& o : cors_origins)
    if (o == *origin) return true;
  return false;
}

void add_cors_headers(const std::vector<std::string>& s, const Request& req, Response& res) {
  if (s.empty()) return;
  res.headers.push_back({"Vary", "Origin"});
  if (origin_allowed(s, req))
    res.headers.push_back({"Access-Control-Allow-Origin", std::string(*req.header("Origin"))});
}

// A browser's preflight (OPTIONS with Access-Control-Request-Method) from an allowed origin: 204,
// with the methods the route's handler takes.
std::optional<Response> cors_preflight(const std::vector<std::string>& s, const Request& req,
                                       const Router& router) {
  if (req.method != "OPTIONS" || !req.header("Access-Control-Request-Method") ||
      !origin_allowed(s, req))
    return std::nullopt;
  Response res;
  res.status = 204;
  res.content_type.clear();
  res.headers = {{"Access-Control-Allow-Methods", std::string(router.methods(req.path))},
                 {"Access-Control-Allow-Headers", "If-None-Match, Accept-Encoding, Content-Type"},
                 {"Access-Control-Max-Age", "600"}};
  return res;
}

// Conditional GET and HEAD for every route (RFC 9110 section 13.1.2): a 200 whose ETag the
// client's If-None-Match names becomes a 304 with the same validator and caching headers and no
// body. Handlers only set the ETag.
void not_modified_if_matching(const Request& req, Response& res) {
  if (res.status != 200 || (req.method != "GET" && req.method != "HEAD")) return;
  auto inm = req.header("If-None-Match");
  if (!inm) return;
  for (auto& h : res.headers)
    if (h.name == "ETag" && etag_matches(*inm, h.value)) {
      if (negotiates_encoding(res)) res.headers.push_back({"Vary", "Accept-Encoding"});  // as 200
      res.status = 304;
      res.content_type.clear();
      res.body.reset();
      return;
    }
}

// Whether the request has Content-Length headers that disagree (RFC 9112 section 6.3: an
// unrecoverable framing error). libmicrohttpd 0.9.75 reads the body by the first and passes the
// rest on; a proxy in front that used another would see a different request (smuggling).
bool conflicting_content_length(const std::vector<Param>& headers) {
  const std::string_view* first = nullptr;
  for (const auto& h : headers) {
    if (h.name.size() != 14 || strncasecmp(h.name.data(), "Content-Length", 14) != 0) continue;
    if (first && *first != h.value) return true;
    first = &h.value;
  }
  return false;
}

// Whether a raw (undecoded) path has "%00" in it.
bool encoded_nul(std::string_view raw) {
  for (std::size_t i = raw.find('%'); i != std::string_view::npos; i = raw.find('%', i + 1))
    if (i + 2 < raw.size() && raw[i + 1] == '0' && raw[i + 2] == '0') return true;
  return false;
}

MHD_Result on_request(void* cls, MHD_Connection* c, const char* url, const char* method,
                      const char* version, const char* upload_data, size_t* upload_size,
                      void** state) {
  auto* daemon = static_cast<HttpDaemon*>(cls);
  const MhdApi& mhd = *daemon->api;
  // First call: headers only. Answering now would count as an early response in MHD 0.9.75 and
  // close kept-alive connections, so answer on a later call. From here to on_completed the
  // request is in flight: a replaced daemon is not stopped under it.
  RequestState* st = state_of(*state);
  if (*state == nullptr || *state == &uri_marker || (st && !st->started)) {
    if (st)
      st->started = true;
    else
      *state = &first_call_marker;
    if (ConnectionSlot* slot = slot_of(mhd, c)) slot->request_started();
    daemon->in_flight.fetch_add(1, std::memory_order_relaxed);
    return MHD_YES;
  }
  if (*upload_size != 0) {
    if (!st) {
      *state = st = new RequestState;
      st->started = true;
    }
    if (st->data.size() + *upload_size > kMaxBodyBytes)
      st->too_large = true;
    else
      st->data.append(upload_data, *upload_size);
    *upload_size = 0;
    return MHD_YES;
  }

  thread_local std::vector<Param> query, headers;
  query.clear();
  headers.clear();
  mhd.get_connection_values(c, MHD_GET_ARGUMENT_KIND, &collect, &query);
  mhd.get_connection_values(c, MHD_HEADER_KIND, &collect, &headers);
  // The connection's addresses (its slot outlives the request); without a slot, looked up now.
  const ConnectionSlot* slot = slot_of(mhd, c);
  std::string remote, local;
  std::uint16_t local_port = 0;
  if (!slot) {
    remote = client_address(mhd, c);
    std::tie(local, local_port) = local_address(mhd, c);
  }

  Request req;
  req.method = method;
  req.path = url;
  req.query = query;
  req.headers = headers;
  req.remote_address = slot ? std::string_view(slot->remote_address) : remote;
  req.protocol = version ? version : "";
  req.local_address = slot ? std::string_view(slot->local_address) : local;
  req.local_port = slot ? slot->local_port : local_port;
  std::string_view raw_path = req.path;
  if (st) {
    req.body = st->data;
    const std::string_view target = st->target;
    const std::size_t q = target.find('?');
    raw_path = target.substr(0, q);
    if (q != std::string_view::npos) req.raw_query = target.substr(q + 1);
  }

  std::size_t header_bytes = 0;
  for (auto& h : headers) header_bytes += h.name.size() + h.value.size() + 4;
  std::size_t uri_bytes = std::strlen(url);
  for (auto& q : query) uri_bytes += q.name.size() + q.value.size() + 2;

  // The routes and CORS origins of this request, whole: reconfigure() swaps them together. The
  // reference keeps the router and its handlers alive until the request is answered.
  const std::shared_ptr<const HttpServer::Published> published =
      daemon->published->load(std::memory_order_acquire);
  const Router& router = *published->router;
  const auto& cors = published->cors_origins;

  int route = -1;
  // The worker's response of its last request, reused: each branch below sets it whole, and a
  // handler's answer is filled in place (Handler::handle_into), so a response shaped like the
  // last one allocates nothing. It keeps that body until the next request, as LastResponse does.
  thread_local Response res;
  if (uri_bytes > kMaxUriBytes)
    res =
        Response::error(414, "request URI longer than " + std::to_string(kMaxUriBytes) + " bytes");
  else if (header_bytes > kMaxHeaderBytes)
    res = Response::error(
        431, "request headers larger than " + std::to_string(kMaxHeaderBytes) + " bytes");
  else if (conflicting_content_length(headers)) {
    res = Response::error(400, "conflicting Content-Length headers");
    res.headers.push_back({"Connection", "close"});  // where its body ends is unknown
  } else if (encoded_nul(raw_path))
    // MHD decodes it into the path, which ends there for everyone reading it as a C string:
    // "/cgi/a%00.txt" would be served as "/cgi/a".
    res = Response::error(400, "request path contains an encoded NUL byte (%00)");
  else if (st && st->too_large)
    res = Response::error(413,
                          "request body larger than " + std::to_string(kMaxBodyBytes) + " bytes");
  else if (auto preflight = cors_preflight(cors, req, router))
    res = std::move(*preflight);  // a browser sends no credentials with it
  else if (auto refused = published->auth ? published->auth->gate(req, *daemon->auth_limiter,
                                                                  *daemon->auth_counters)
                                          : std::nullopt) {
    res = std::move(*refused);
    route = router.route_of(req.path);  // counted as the route's, not as unmatched
  } else
    router.dispatch(req, res, &route);
  not_modified_if_matching(req, res);
  add_cors_headers(cors, req, res);
  router.count(route, res.status);

  const std::shared_ptr<LoadedLibrary>* code =
      route >= 0 ? &router.routes()[static_cast<std::size_t>(route)].handler->library : nullptr;
  MHD_Response* response =
      make_response(mhd, res, req.accepts_gzip(), daemon->draining.load(std::memory_order_relaxed),
                    *daemon->gzip, code);
  if (!response) return MHD_NO;
  return mhd.queue_response(c, static_cast<unsigned>(res.status), response);
}

// Once per request whose first callback ran (MHD 0.9.75 calls it only for those).
// Since on_uri is set, MHD calls it for every request whose request line it read, also those it
// answered (or dropped) before on_request ran: those were never in flight.
void on_completed(void* cls, MHD_Connection* c, void** state, MHD_RequestTerminationCode) {
  bool started = *state == &first_call_marker;
  if (RequestState* st = state_of(*state)) {
    started = st->started;
    delete st;
  }
  *state = nullptr;
  auto* daemon = static_cast<HttpDaemon*>(cls);
  if (ConnectionSlot* slot = slot_of(*daemon->api, c)) slot->request_done();
  if (started) daemon->in_flight.fetch_sub(1, std::memory_order_release);
}

// Keeps each worker's list of its connections (HttpWorker), the slot in MHD's socket context.
void on_connection(void* cls, MHD_Connection* c, void** context,
                   MHD_ConnectionNotificationCode code) {
  auto* w = static_cast<HttpWorker*>(cls);
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    const MHD_ConnectionInfo* info =
        w->api->get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    auto [local, local_port] = local_address(*w->api, c);
    *context = &w->connection_started(info ? info->connect_fd : -1, client_address(*w->api, c),
                                      std::move(local), local_port);
    return;
  }
  if (code == MHD_CONNECTION_NOTIFY_CLOSED)
    w->connection_closed(static_cast<ConnectionSlot*>(std::exchange(*context, nullptr)));
}

// What libmicrohttpd logged on this thread since it was cleared: MHD_start_daemon() says why it
// failed (GnuTLS's reason for refusing a key, say) only there.
thread_local std::string mhd_messages;

void on_mhd_log(void* cls, const char* fmt, va_list ap) {
  char buf[512];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  std::string_view msg(buf);
  while (!msg.empty() && msg.back() == '\n') msg.remove_suffix(1);
  if (mhd_messages.size() < 1024) (mhd_messages += mhd_messages.empty() ? "" : " ") += msg;
  static_cast<Logger*>(cls)->debug(std::string("http: ") + std::string(msg));
}

}  // namespace

int auto_worker_threads() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  return std::clamp(cpus, 1, kMaxAutoThreads);
}

std::string http_library_version() {
  const MhdApi& linked = linked_mhd();
  return linked.name + (linked.tls
                            ? " (with TLS)"
                            : std::string(" (without TLS; [http.tls] loads ") + kTlsLibrary + ")");
}

std::string http_tls_library() {
  return tls_mhd().name;
}

namespace {
std::shared_ptr<const Authenticator> make_authenticator(const HttpAuth& a) {
  return a.enabled() ? std::make_shared<const Authenticator>(a) : nullptr;
}
}  // namespace

HttpServer::HttpServer(HttpSettings settings, std::shared_ptr<const Router> router, Logger& log)
    : settings_(std::move(settings)),
      log_(log),
      slot_signal_(std::make_unique<detail::SlotSignal>()) {
  if (settings_.threads <= 0) settings_.threads = auto_worker_threads();
  published_.store(std::make_shared<const Published>(
      Published{std::move(router), settings_.cors_origins, make_authenticator(settings_.auth)}));
}

namespace {

using http::bound_port;
using http::ensure_descriptors;
using http::open_listener;
using http::OwnedFd;
using http::same_host;

// What takes a new daemon: another address, or any of these.
bool needs_new_daemon(const HttpSettings& a, const HttpSettings& b, bool same_address) {
  return !same_address || a.threads != b.threads || a.keep_alive != b.keep_alive ||
         a.max_connections != b.max_connections || !(a.tls == b.tls);
}

constexpr auto kRetireWait = std::chrono::seconds(2);

}  // namespace

std::unique_ptr<HttpDaemon> HttpServer::start_daemon(const HttpSettings& s) {
  auto d = std::make_unique<HttpDaemon>();
  d->published = &published_;
  d->log = &log_;
  d->gzip = &gzip_cache_;
  d->auth_limiter = &auth_limiter_;
  d->auth_counters = &auth_counters_;
  d->settings = s;
  // [http.tls]: the TLS build of libmicrohttpd (loaded now if this is its first use), given the
  // PEM text read with the config; MHD reads it while it starts each worker. A reload that
  // changes either file's content (a renewed certificate) starts a new set of workers, like a
  // change of threads.
  d->api = s.tls.enabled() ? &tls_mhd() : &linked_mhd();
  const bool tls = s.tls.enabled();
  const MHD_OptionItem tls_options[] = {
      {tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0,
       const_cast<char*>(d->settings.tls.cert_pem.c_str())},
      {MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char*>(d->settings.tls.key_pem.c_str())},
      {MHD_OPTION_END, 0, nullptr}};
  // No listening socket: the Acceptor hands connections over. MHD_USE_ITC wakes the worker a
  // connection is added to (MHD would add it for MHD_USE_NO_LISTEN_SOCKET anyway).
  const unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
                         MHD_USE_ITC | MHD_USE_NO_LISTEN_SOCKET | (tls ? MHD_USE_TLS : 0);
  const auto timeout_s = static_cast<unsigned>(s.keep_alive.count() / 1000);
  const auto threads = static_cast<std::uint64_t>(s.threads);
  const auto max_connections = static_cast<std::uint64_t>(s.max_connections);
  ensure_descriptors(max_connections, log_);
  for (std::uint64_t i = 0; i < threads; ++i) {
    auto worker = std::make_unique<HttpWorker>();
    auto& w = *worker;
    d->workers.push_back(std::move(worker));
    w.api = d->api;
    w.freed = slot_signal_.get();
    // max_connections split as evenly as it goes; a worker whose share is 0 gets nothing. MHD's
    // own limit is kEvictHeadroom + 1 more: connections evicted but not yet closed, and one the
    // acceptor counts closed a moment before MHD does (between NOTIFY_CLOSED and MHD's count);
    // the limit is the acceptor's.
    w.limit = max_connections / threads + (i < max_connections % threads ? 1 : 0);
    // Per-connection memory: it holds the request's header block (we answer 431 with JSON past
    // kMaxHeaderBytes, so it must fit that and the read buffer) and the response headers; 32
    // connections of a busy client hold 32 of these. Above 32 KiB MHD would mmap/munmap every
    // connection's pool: measured as most of the idle CPU of a client that polls with curl.
    mhd_messages.clear();
    // The logger first: MHD reports what it finds in the options after it through it.
    w.mhd = d->api->start_daemon(
        flags, 0, nullptr, nullptr, &on_request, d.get(), MHD_OPTION_EXTERNAL_LOGGER, &on_mhd_log,
        &log_, MHD_OPTION_CONNECTION_TIMEOUT, timeout_s, MHD_OPTION_CONNECTION_LIMIT,
        static_cast<unsigned>(w.limit + detail::kEvictHeadroom + 1), MHD_OPTION_NOTIFY_COMPLETED,
        &on_completed, d.get(), MHD_OPTION_URI_LOG_CALLBACK, &on_uri, nullptr,
        MHD_OPTION_NOTIFY_CONNECTION, &on_connection, &w, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        kConnectionMemoryBytes, MHD_OPTION_ARRAY, tls_options, MHD_OPTION_END);
    if (!w.mhd && tls)  // `d` stops the workers started so far
      throw std::runtime_error(
          "cannot start the HTTPS server on " + s.bind.str() + " with cert_file \"" +
          s.tls.cert_file + "\" and key_file \"" + s.tls.key_file +
          "\": " + (mhd_messages.empty() ? std::string(std::strerror(errno)) : mhd_messages));
    if (!w.mhd)
      throw std::runtime_error("cannot start the HTTP server on " + s.bind.str() + ": " +
                               std::strerror(errno));
  }
  return d;
}

HttpServer::~HttpServer() {
  stop();
}

void HttpServer::start() {
  if (daemon_) return;
  OwnedFd listener(open_listener(settings_.bind));
  const std::uint16_t port = bound_port(listener.fd);
  auto daemon = start_daemon(settings_);
  auto acceptor = std::make_unique<detail::Acceptor>(log_, *slot_signal_);
  acceptor->start(listener.release(), daemon.get(), settings_.bind);
  daemon_ = std::move(daemon);
  acceptor_ = std::move(acceptor);
  port_.store(port, std::memory_order_release);
}

void HttpServer::reconfigure(HttpSettings settings, std::shared_ptr<const Router> router) {
  if (settings.threads <= 0) settings.threads = auto_worker_threads();
  reap_retired(false);
  // Everything that can fail comes first; the old daemon, listener, settings and routes are
  // untouched until the commit below.
  // Unchanged [http.auth] keeps its Authenticator, and so its cache of verified credentials.
  auto auth = published_.load(std::memory_order_acquire)->auth;
  if (!(settings.auth == settings_.auth)) auth = make_authenticator(settings.auth);
  auto next_published = std::make_shared<const Published>(
      Published{std::move(router), settings.cors_origins, std::move(auth)});
  std::unique_ptr<HttpDaemon> next;
  OwnedFd listener(-1);  // a new listening socket, for a new address
  BindAddress own = settings_.bind;
  own.port = port();
  // The address in use: the same host, and the port configured or the one it got for port 0.
  const bool same_address =
      same_host(settings.bind, own) && settings.bind.ipv6 == own.ipv6 &&
      (settings.bind.port == settings_.bind.port || settings.bind.port == own.port);
  if (daemon_ && needs_new_daemon(settings_, settings, same_address)) {
    // The same address keeps its socket, so no connection attempt finds the port closed; a new
    // one listens before the old one closes.
    if (!same_address) listener.fd = open_listener(settings.bind, &own);
    const std::uint16_t new_port = same_address ? port() : bound_port(listener.fd);
    next = start_daemon(settings);
    // The switch: new connections go to `next` from here on, and a new address replaces the old
    // one. Fails (before any change) only if the new listener cannot be watched.
    acceptor_->switch_to(next.get(), listener.release(), settings.bind);
    port_.store(new_port, std::memory_order_release);
  }

  // Commit: nothing below fails.
  published_.store(std::move(next_published), std::memory_order_release);
  if (next) {
    std::unique_ptr<HttpDaemon> old = std::move(daemon_);
    daemon_ = std::move(next);
    log_.debug("http: " + std::to_string(daemon_->settings.threads) + " workers on " +
               daemon_->settings.bind.str() + " took over from " + old->settings.bind.str());
    retire(std::move(old));
  }
  settings_ = std::move(settings);
}

void HttpServer::retire(std::unique_ptr<HttpDaemon> old) {
  // The acceptor hands it nothing from now on (switch_to() returned). Connections it holds get
  // "Connection: close" with their next answer and go.
  old->draining.store(true, std::memory_order_relaxed);
  HttpDaemon* d = old.get();
  d->retirer = std::thread([d] {
    // Stopped once no connection is left (including those handed over but not yet taken up by
    // a worker), or after kRetireWait, or (stop()) once nothing is in flight. (A connection MHD
    // failed to take up, out of memory, never closes in our count: then kRetireWait.)
    const auto begin = std::chrono::steady_clock::now();
    for (auto now = begin; now < begin + kRetireWait; now = std::chrono::steady_clock::now()) {
      if (d->in_flight.load(std::memory_order_acquire) == 0 &&
          (d->hurry.load() || !d->has_connections()))
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    d->shut_down();
    d->done.store(true, std::memory_order_release);
  });
  retiring_.push_back(std::move(old));
}

void HttpServer::reap_retired(bool all) {
  for (auto it = retiring_.begin(); it != retiring_.end();) {
    if (all) (*it)->hurry.store(true);
    if (all || (*it)->done.load(std::memory_order_acquire)) {
      (*it)->retirer.join();
      it = retiring_.erase(it);
    } else {
      ++it;
    }
  }
}

void HttpServer::stop() {
  // No new connections first (the address refuses from here on), then the daemons, whose
  // in-flight requests finish.
  acceptor_.reset();
  port_.store(0, std::memory_order_release);
  if (daemon_) daemon_->shut_down();
  daemon_.reset();
  reap_retired(true);
}

std::shared_ptr<const Router> HttpServer::router() const {
  return published_.load(std::memory_order_acquire)->router;
}

int HttpServer::requests_in_flight() const {
  int n = daemon_ ? daemon_->in_flight.load() : 0;
  for (auto& d : retiring_) n += d->in_flight.load();
  return n;
}

std::vector<HttpRequestCount> HttpServer::request_counts() const {
  return published_.load(std::memory_order_acquire)->router->request_counts();
}

}  // namespace kiwi::agent
