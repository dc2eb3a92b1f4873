#include "http/acceptor.hpp"
#include "base/thread_name.hpp"

#include <poll.h>
#include <sys/epoll.h>

#include <algorithm>
#include <utility>

namespace kiwi::agent::http {

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

Acceptor::Acceptor(Logger& log, SlotSignal& freed) : log_(log), freed_(freed) {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || wake_fd_ < 0) {
    const int err = errno;
    close_fds();
    throw std::runtime_error(std::string("cannot start the HTTP acceptor: ") + std::strerror(err));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
    const int err = errno;
    close_fds();
    throw std::runtime_error(std::string("cannot start the HTTP acceptor: ") + std::strerror(err));
  }
}

Acceptor::~Acceptor() {
  stop();
  if (held_.fd >= 0) ::close(held_.fd);
  close_fds();
}

void Acceptor::start(int listener, WorkerSet* target, const BindAddress& where) {
  listener_ = listener;
  add_to_epoll(listener, where);
  target_ = target;
  thread_ = std::thread([this] { run(); });
}

void Acceptor::switch_to(WorkerSet* target, int listener, const BindAddress& where) {
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

void Acceptor::stop() {
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

void Acceptor::add_to_epoll(int listener, const BindAddress& where) {
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

void Acceptor::run() {
  name_this_thread("kiwi-accept");
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

void Acceptor::pause() {
  pollfd p{wake_fd_, POLLIN, 0};
  ::poll(&p, 1, static_cast<int>(kBackoff.count()));
}

void Acceptor::wait_for_slot() {
  pollfd p[2] = {{wake_fd_, POLLIN, 0}, {freed_.fd, POLLIN, 0}};
  if (::poll(p, 2, static_cast<int>(kHoldRetry.count())) > 0 && (p[1].revents & POLLIN)) {
    std::uint64_t n;
    [[maybe_unused]] auto r = ::read(freed_.fd, &n, sizeof n);
  }
}

bool Acceptor::place(WorkerSet& target, const Accepted& c) {
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

Acceptor::Outcome Acceptor::accept_batch(int listener, WorkerSet& target, int max, int& err) {
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
    const int fd =
        ::accept4(listener, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
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

Worker* Acceptor::pick(WorkerSet& d) {
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

Worker* Acceptor::evict(WorkerSet& d) {
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

void Acceptor::close_fds() {
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  epoll_fd_ = wake_fd_ = -1;
}

}  // namespace kiwi::agent::http
