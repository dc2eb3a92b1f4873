// A tiny HTTP receiver on loopback for the tests of what the agent and its plugins push (remote
// write, notifications, Alertmanager's webhooks): a thread per connection (curl and Go keep theirs
// alive), answers each request with the status the script gives, and keeps what it was sent: the
// request line, headers and body, and a remote write body decoded (snappy, then the protobuf
// WriteRequest read field by field).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "remote_write.hpp"

namespace kiwi_test {

struct ReceivedSeries {
  std::map<std::string, std::string> labels;
  std::vector<std::pair<std::int64_t, double>> samples;
};

struct ReceivedRequest {
  int status = 0;                              // what the receiver answered (0: nothing, it hung)
  std::string method;                          // "POST"
  std::string target;                          // "/api/v1/write"
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;                            // as sent
  std::vector<ReceivedSeries> series;          // a remote write body, decoded (else none)
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

namespace wire {
inline std::uint64_t varint(std::string_view& s) {
  std::uint64_t v = 0;
  for (int shift = 0; shift < 64 && !s.empty(); shift += 7) {
    const auto b = static_cast<unsigned char>(s.front());
    s.remove_prefix(1);
    v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  throw std::runtime_error("bad varint");
}
// Calls fn(field, wire type, payload or varint) for each field of a message.
template <class Fn>
void fields(std::string_view s, Fn&& fn) {
  while (!s.empty()) {
    const auto key = varint(s);
    const auto type = key & 7;
    if (type == 0) {
      fn(key >> 3, type, std::string_view(), varint(s));
    } else if (type == 1 || type == 2) {
      const std::size_t n = type == 1 ? 8 : varint(s);
      if (s.size() < n) throw std::runtime_error("truncated field");
      fn(key >> 3, type, s.substr(0, n), 0);
      s.remove_prefix(n);
    } else {
      throw std::runtime_error("unexpected wire type");
    }
  }
}
inline std::vector<ReceivedSeries> decode(std::string_view raw) {
  std::vector<ReceivedSeries> out;
  fields(raw, [&](std::uint64_t, std::uint64_t, std::string_view ts, std::uint64_t) {
    ReceivedSeries& r = out.emplace_back();
    fields(ts, [&](std::uint64_t f, std::uint64_t, std::string_view m, std::uint64_t) {
      std::string a;
      std::int64_t t = 0;
      double v = 0;
      fields(m, [&](std::uint64_t g, std::uint64_t type, std::string_view p, std::uint64_t x) {
        if (f == 1 && g == 1) a = std::string(p);
        if (f == 1 && g == 2) r.labels[a] = std::string(p);
        if (f == 2 && g == 1 && type == 1) std::memcpy(&v, p.data(), 8);
        if (f == 2 && g == 2) t = static_cast<std::int64_t>(x);
      });
      if (f == 2) r.samples.emplace_back(t, v);
    });
  });
  return out;
}
}  // namespace wire

class Receiver {
 public:
  // `status_of(n)`: the answer to the n-th request (0-based); 0 hangs (never answers).
  explicit Receiver(std::function<int(int)> status_of) : status_of_(std::move(status_of)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_fd_, 16) != 0)
      throw std::runtime_error("receiver: cannot listen");
    socklen_t len = sizeof a;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~Receiver() {
    stop_ = true;
    thread_.join();
    for (auto& t : connections_) t.join();
    for (int fd : held_) ::close(fd);
    ::close(listen_fd_);
  }
  int port() const { return port_; }
  // http://127.0.0.1:<port>
  std::string base() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string url() const { return base() + "/api/v1/write"; }
  std::vector<ReceivedRequest> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }

 private:
  // Waits for `fd` to be readable; false when stopping (checked every 100 ms).
  bool readable(int fd) {
    while (!stop_) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) > 0) return true;
    }
    return false;
  }
  void run() {
    while (readable(listen_fd_)) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      connections_.emplace_back([this, fd] {
        if (serve(fd)) {
          ::close(fd);
          return;
        }
        std::lock_guard lock(mutex_);
        held_.push_back(fd);  // hung on purpose: kept open, unanswered
      });
    }
  }
  // Serves requests on one connection until it closes; false if it was left hanging.
  bool serve(int fd) {
    std::string buf;
    for (;;) {
      std::size_t head_end;
      while ((head_end = buf.find("\r\n\r\n")) == std::string::npos) {
        if (!readable(fd)) return true;
        char chunk[65536];
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) return true;
        buf.append(chunk, static_cast<std::size_t>(n));
      }
      ReceivedRequest req;
      std::string head = buf.substr(0, head_end);
      std::size_t at = head.find("\r\n");
      const std::string request_line = head.substr(0, at);
      req.method = request_line.substr(0, request_line.find(' '));
      req.target = request_line.substr(req.method.size() + 1);
      req.target = req.target.substr(0, req.target.find(' '));
      while (at != std::string::npos && at < head.size()) {
        const std::size_t next = head.find("\r\n", at + 2);
        const std::string line =
            head.substr(at + 2, next == std::string::npos ? std::string::npos : next - at - 2);
        if (auto colon = line.find(':'); colon != std::string::npos) {
          std::string name = line.substr(0, colon);
          for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          std::string value = line.substr(colon + 1);
          while (!value.empty() && value.front() == ' ') value.erase(0, 1);
          req.headers[name] = value;
        }
        at = next;
      }
      const std::size_t length =
          std::stoul(req.headers.count("content-length") ? req.headers["content-length"] : "0");
      while (buf.size() < head_end + 4 + length) {
        if (!readable(fd)) return true;
        char chunk[65536];
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) return true;
        buf.append(chunk, static_cast<std::size_t>(n));
      }
      const std::string body = buf.substr(head_end + 4, length);
      buf.erase(0, head_end + 4 + length);
      int status;
      {
        std::lock_guard lock(mutex_);
        status = status_of_(static_cast<int>(requests_.size()));
      }
      req.body = body;
      try {
        if (req.header("content-encoding") == "snappy")
          req.series = wire::decode(kiwi_remote_write::uncompress_snappy(body));
      } catch (const std::exception&) {
        req.series.clear();
      }
      req.status = status;
      {
        std::lock_guard lock(mutex_);
        requests_.push_back(std::move(req));
      }
      if (status == 0) return false;
      const std::string reason =
          status >= 400 ? "test receiver says " + std::to_string(status) : "";
      const std::string answer = "HTTP/1.1 " + std::to_string(status) +
                                 " X\r\nContent-Length: " + std::to_string(reason.size()) +
                                 "\r\n\r\n" + reason;
      if (::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL) < 0) return true;
    }
  }

  std::function<int(int)> status_of_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> connections_;  // the accepting thread's alone
  std::vector<int> held_;
  mutable std::mutex mutex_;
  std::vector<ReceivedRequest> requests_;
  std::thread thread_;
};

}  // namespace kiwi_test
