// The HTTP server on loopback with in-process handlers: serving, and reconfigure() while serving
// (routes, CORS, threads, bind), with a plain-socket HTTP/1.1 client.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/compress.hpp"
#include "http/http_server.hpp"
#include "http/response_cache.hpp"
#include "http/router.hpp"
#include "test_support.hpp"

using namespace kiwi;
using namespace kiwi::agent;
using namespace std::chrono_literals;

namespace {

// MHD's workers log too: a logger for many threads.
class TestLogger final : public Logger {
 public:
  void log(LogLevel, std::string_view m) override {
    std::lock_guard lock(mutex_);
    lines_.emplace_back(m);
  }
  bool contains(std::string_view text) {
    std::lock_guard lock(mutex_);
    return std::any_of(lines_.begin(), lines_.end(),
                       [&](const std::string& l) { return l.find(text) != std::string::npos; });
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> lines_;
};

// Whether `done()` holds within `timeout`, looked at every millisecond: a wait on the event itself,
// never a sleep that hopes it happened.
template <class F>
bool eventually(F done, std::chrono::milliseconds timeout = 10000ms) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Answers its text, after `delay`; `entered` counts the calls that began.
class TextHandler final : public Handler {
 public:
  explicit TextHandler(std::string text, std::chrono::milliseconds delay = 0ms)
      : text_(std::move(text)), delay_(delay) {}
  Response handle(const Request&) override {
    entered.fetch_add(1);
    if (delay_.count()) std::this_thread::sleep_for(delay_);
    Response r;
    r.content_type = "text/plain";
    r.body = std::make_shared<const std::string>(text_);
    return r;
  }
  std::atomic<int> entered{0};

 private:
  std::string text_;
  std::chrono::milliseconds delay_;
};

// A route to an in-process handler: no library, as a plugin's would have.
Route route(const std::string& path, const std::string& text,
            std::chrono::milliseconds delay = 0ms) {
  auto instance = std::make_shared<PluginInstance<Handler>>();
  instance->object = std::make_unique<TextHandler>(text, delay);
  return {path, std::move(instance)};
}

TextHandler& handler_of(const Route& r) {
  return static_cast<TextHandler&>(*r.handler->object);
}

struct Refused : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct Closed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Reply {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

// One HTTP/1.1 connection (kept alive unless the server closes it) to host:port (IPv4).
class Conn {
 public:
  Conn(const std::string& host, std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error("socket failed");
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, host.c_str(), &a.sin_addr);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      const int err = errno;
      ::close(fd_);
      fd_ = -1;
      if (err == ECONNREFUSED) throw Refused("connection to " + host + " refused");
      throw std::runtime_error("connect to " + host + ": " + std::strerror(err));
    }
  }
  ~Conn() {
    if (fd_ >= 0) ::close(fd_);
  }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  Reply get(const std::string& path,
            const std::vector<std::pair<std::string, std::string>>& h = {}) {
    return request("GET", path, h);
  }
  // A HEAD response has the GET's Content-Length and no body.
  Reply request(const std::string& method, const std::string& path,
                const std::vector<std::pair<std::string, std::string>>& h = {}) {
    std::string req = method + " " + path + " HTTP/1.1\r\nHost: test\r\n";
    for (auto& [k, v] : h) req += k + ": " + v + "\r\n";
    req += "\r\n";
    for (std::string_view rest = req; !rest.empty();) {
      ssize_t n = ::send(fd_, rest.data(), rest.size(), MSG_NOSIGNAL);
      if (n <= 0) throw Closed("send failed");
      rest.remove_prefix(static_cast<std::size_t>(n));
    }
    while (buf_.find("\r\n\r\n") == std::string::npos) fill();
    const auto end = buf_.find("\r\n\r\n");
    const std::string head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    Reply r;
    r.status = std::stoi(head.substr(9, 3));
    for (std::size_t at = head.find("\r\n"); at != std::string::npos;) {
      const auto next = head.find("\r\n", at + 2);
      const std::string line =
          head.substr(at + 2, next == std::string::npos ? next : next - at - 2);
      at = next;
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
    }
    const std::size_t length = r.headers.count("content-length") && method != "HEAD"
                                   ? std::stoul(r.headers["content-length"])
                                   : 0;
    while (buf_.size() < length) fill();
    r.body = buf_.substr(0, length);
    buf_.erase(0, length);
    return r;
  }

  // Waits up to `timeout` for the server to close the connection.
  bool closed_by_server(std::chrono::milliseconds timeout = 3000ms) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      char c;
      ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
      std::this_thread::sleep_for(5ms);
    }
    return false;
  }

 private:
  void fill() {
    char chunk[16384];
    ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n > 0) {
      buf_.append(chunk, static_cast<std::size_t>(n));
      return;
    }
    if (n == 0 || errno == ECONNRESET) throw Closed("closed by the server");
    throw std::runtime_error(std::string("recv: ") + std::strerror(errno));
  }
  int fd_ = -1;
  std::string buf_;
};

Reply get(std::uint16_t port, const std::string& path,
          const std::vector<std::pair<std::string, std::string>>& h = {},
          const std::string& host = "127.0.0.1") {
  Conn c(host, port);
  return c.get(path, h);
}

bool refuses(const std::string& host, std::uint16_t port) {
  try {
    Conn c(host, port);
    return false;
  } catch (const Refused&) {
    return true;
  }
}

HttpSettings loopback(int threads = 1) {
  HttpSettings s;
  s.bind = {"127.0.0.1", 0, false};
  s.threads = threads;
  return s;
}

std::shared_ptr<const Router> make_router(std::vector<Route> routes,
                                          const std::shared_ptr<const Router>& previous = nullptr) {
  return std::make_shared<const Router>(std::move(routes), previous.get());
}

std::uint64_t count_of(const std::vector<HttpRequestCount>& counts, const std::string& route,
                       int status) {
  for (auto& c : counts)
    if (c.route == route && c.status == status) return c.count;
  return 0;
}

}  // namespace

TEST_CASE("http: reconfigure swaps the routes without a new daemon and keeps unchanged handlers") {
  TestLogger log;
  auto first = make_router({route("/a", "A"), route("/b", "B")});
  HttpServer server(loopback(0), first, log);
  server.start();
  const auto port = server.port();
  REQUIRE(port != 0);
  CHECK(server.threads() == auto_worker_threads());
  Conn kept("127.0.0.1", port);
  CHECK(kept.get("/a").body == "A");
  CHECK(get(port, "/b").body == "B");

  const auto unchanged = first->routes()[0].handler;
  auto second = make_router({first->routes()[0], route("/c", "C")}, first);
  server.reconfigure(loopback(0), second);  // threads "auto" again: the same daemon

  CHECK(server.port() == port);
  CHECK(server.router() == second);
  CHECK(server.router()->routes()[0].handler.get() == unchanged.get());
  CHECK(get(port, "/c").body == "C");
  CHECK(get(port, "/b").status == 404);
  // The kept-alive connection is served on, by the same daemon: no "Connection: close".
  auto r = kept.get("/a");
  CHECK(r.status == 200);
  CHECK(r.body == "A");
  CHECK(r.header("connection") != "close");
  CHECK(handler_of(second->routes()[0]).entered.load() == 2);
  server.stop();
}

TEST_CASE("http: reconfigure swaps the CORS origins") {
  TestLogger log;
  auto settings = loopback();
  settings.cors_origins = {"http://one.test"};
  auto router = make_router({route("/a", "A")});
  HttpServer server(settings, router, log);
  server.start();
  const auto port = server.port();
  CHECK(get(port, "/a", {{"Origin", "http://one.test"}}).header("access-control-allow-origin") ==
        "http://one.test");
  CHECK(get(port, "/a", {{"Origin", "http://two.test"}}).header("access-control-allow-origin") ==
        "");

  settings.cors_origins = {"http://two.test"};
  server.reconfigure(settings, router);
  CHECK(server.port() == port);
  CHECK(server.settings().cors_origins == settings.cors_origins);
  CHECK(get(port, "/a", {{"Origin", "http://one.test"}}).header("access-control-allow-origin") ==
        "");
  CHECK(get(port, "/a", {{"Origin", "http://two.test"}}).header("access-control-allow-origin") ==
        "http://two.test");

  settings.cors_origins.clear();
  server.reconfigure(settings, router);
  auto r = get(port, "/a", {{"Origin", "http://two.test"}});
  CHECK(r.header("access-control-allow-origin") == "");
  CHECK(r.header("vary") == "Accept-Encoding");  // the server's compression, no Origin: CORS off
}

// Client threads asking GET /a in a loop until stop(), half of them with a new connection per
// request, half keeping theirs alive until the server says "Connection: close" (then moving over,
// as browsers do). Every request must get "A"; anything else is a failure.
class ClientLoop {
 public:
  ClientLoop(std::uint16_t port, int clients) : port_(port) {
    for (int i = 0; i < clients; ++i) threads_.emplace_back([this, i] { run(i % 2 == 1); });
  }
  ~ClientLoop() { stop(); }
  void stop() {
    running_.store(false);
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }
  int answered() const { return answered_.load(); }
  // Waits until the clients have had `n` more answers (10 s at most); false if they did not.
  bool answer_more(int n) {
    const int target = answered() + n;
    return eventually([&] { return answered() >= target; });
  }
  std::vector<std::string> failures() {
    std::lock_guard lock(mutex_);
    return failures_;
  }

 private:
  void run(bool keep_alive) {
    std::unique_ptr<Conn> conn;
    while (running_.load()) {
      try {
        if (!conn) conn = std::make_unique<Conn>("127.0.0.1", port_);
        auto r = conn->get("/a");
        if (r.status != 200 || r.body != "A") throw std::runtime_error("bad answer");
        answered_.fetch_add(1);
        if (!keep_alive || r.header("connection") == "close") conn.reset();
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex_);
        failures_.push_back(e.what());
        conn.reset();
      }
    }
  }
  std::uint16_t port_;
  std::atomic<bool> running_{true};
  std::atomic<int> answered_{0};
  std::mutex mutex_;
  std::vector<std::string> failures_;
  std::vector<std::thread> threads_;
};

TEST_CASE("http: a change of threads on the same address keeps the port and refuses nothing") {
  TestLogger log;
  auto router = make_router({route("/a", "A")});
  HttpServer server(loopback(1), router, log);
  server.start();
  const auto port = server.port();

  ClientLoop clients(port, 2);

  int threads = 1;
  for (int i = 0; i < 6; ++i) {
    CHECK(clients.answer_more(4));  // served between two changes
    threads = threads % 3 + 1;
    auto s = loopback(threads);
    s.keep_alive = std::chrono::milliseconds(i % 2 ? 5000 : 4000);
    server.reconfigure(s, router);
    CHECK(server.port() == port);
    CHECK(server.threads() == threads);
  }
  CHECK(clients.answer_more(4));  // and after the last
  clients.stop();

  const auto failures = clients.failures();
  INFO((failures.empty() ? std::string() : failures.front()));
  CHECK(failures.empty());
  CHECK(clients.answered() > 20);
  CHECK(count_of(server.request_counts(), "/a", 200) ==
        static_cast<std::uint64_t>(clients.answered()));
  server.stop();
}

// The case that aborted the agent while libmicrohttpd accepted itself and a reload quiesced it: a
// busy thread pool replaced again and again. Two clients open a connection per request, two keep
// theirs alive until told to close.
TEST_CASE("http: 20 daemon changes in a row under new and kept-alive connections fail nothing") {
  TestLogger log;
  auto router = make_router({route("/a", "A")});
  HttpServer server(loopback(2), router, log);
  server.start();
  const auto port = server.port();

  ClientLoop clients(port, 4);

  int threads = 2;
  for (int i = 0; i < 20; ++i) {
    CHECK(clients.answer_more(4));
    threads = threads % 4 + 1;
    server.reconfigure(loopback(threads), router);
    CHECK(server.port() == port);
    CHECK(server.threads() == threads);
  }
  CHECK(clients.answer_more(4));
  clients.stop();

  const auto failures = clients.failures();
  INFO((failures.empty() ? std::string() : failures.front()));
  CHECK(failures.empty());
  CHECK(clients.answered() > 40);
  CHECK(count_of(server.request_counts(), "/a", 200) ==
        static_cast<std::uint64_t>(clients.answered()));
  server.stop();
  CHECK(refuses("127.0.0.1", port));
}

TEST_CASE(
    "http: max_connections holds: a newcomer past it waits, and the connection idle the longest "
    "makes room") {
  for (int threads : {1, 2}) {
    INFO("threads = " << threads);
    TestLogger log;
    auto router = make_router({route("/a", "A")});
    auto s = loopback(threads);
    s.max_connections = 2;
    HttpServer server(s, router, log);
    server.start();
    const auto port = server.port();
    Conn first("127.0.0.1", port);
    CHECK(first.get("/a").status == 200);  // both taken up by a worker, so both count
    // The first request done (its connection idle from then on) before the second begins, so the
    // first is the connection idle the longest.
    REQUIRE(eventually([&] { return server.requests_in_flight() == 0; }));
    Conn second("127.0.0.1", port);
    CHECK(second.get("/a").status == 200);

    // Both were in use a moment ago (within kEvictIdle): the third waits for one to be closed
    // (it was closed unanswered), and it is the one idle the longest.
    Conn third("127.0.0.1", port);
    CHECK(third.get("/a").status == 200);
    CHECK(first.closed_by_server());
    CHECK(second.get("/a").status == 200);  // the other serves on
    CHECK(third.get("/a").status == 200);
    server.stop();
  }
}

TEST_CASE(
    "http: max_connections holds: with every slot answering, a newcomer is closed unanswered "
    "after waiting 1 s") {
  TestLogger log;
  auto router = make_router({route("/slow", "slow", 2500ms), route("/a", "A")});
  auto s = loopback(1);
  s.max_connections = 1;
  HttpServer server(s, router, log);
  server.start();
  const auto port = server.port();
  std::thread busy([&] { CHECK(get(port, "/slow").status == 200); });
  // /slow is being answered: its slot cannot be taken.
  CHECK(eventually([&] { return handler_of(router->routes()[0]).entered.load() == 1; }));
  Conn late("127.0.0.1", port);
  const auto begin = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(late.get("/a"), Closed);
  const auto waited = std::chrono::steady_clock::now() - begin;
  CHECK(waited >= 900ms);
  CHECK(waited < 2000ms);  // closed before /slow finished: not served late
  busy.join();
  CHECK(log.contains("waited 1 s for a slot"));
  CHECK(get(port, "/a").status == 200);  // the slot is free again
  server.stop();
}

TEST_CASE("http: a bind move to a new port answers there and refuses on the old one") {
  TestLogger log;
  auto router = make_router({route("/a", "A")});
  HttpServer server(loopback(), router, log);
  server.start();
  const auto old_port = server.port();
  Conn kept("127.0.0.1", old_port);
  CHECK(kept.get("/a").status == 200);

  auto s = loopback();
  s.bind.port = static_cast<std::uint16_t>(kiwi_test::free_port());
  server.reconfigure(s, router);
  CHECK(server.port() == s.bind.port);
  CHECK(server.settings().bind.port == s.bind.port);
  CHECK(get(s.bind.port, "/a").body == "A");
  CHECK(refuses("127.0.0.1", old_port));
  // The old daemon still answers its kept-alive connection, once, and closes it.
  auto r = kept.get("/a");
  CHECK(r.status == 200);
  CHECK(r.header("connection") == "close");
  CHECK(kept.closed_by_server());
}

TEST_CASE("http: a bind move to 127.0.0.2 keeps the port number") {
  TestLogger log;
  auto router = make_router({route("/a", "A")});
  HttpServer server(loopback(), router, log);
  server.start();
  const auto port = server.port();

  auto s = loopback();
  s.bind = {"127.0.0.2", port, false};
  server.reconfigure(s, router);
  CHECK(server.port() == port);
  CHECK(get(port, "/a", {}, "127.0.0.2").body == "A");
  CHECK(refuses("127.0.0.1", port));
  server.stop();
  CHECK(refuses("127.0.0.2", port));
}

TEST_CASE("http: a bind that fails throws and leaves the server as it was") {
  TestLogger log;
  auto first = make_router({route("/a", "A")});
  auto settings = loopback();
  settings.cors_origins = {"http://one.test"};
  HttpServer server(settings, first, log);
  server.start();
  const auto port = server.port();

  // A port another socket holds.
  int other = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  REQUIRE(::bind(other, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(other, 4) == 0);
  ::getsockname(other, reinterpret_cast<sockaddr*>(&a), &len);
  const std::uint16_t taken = ntohs(a.sin_port);

  auto s = loopback(2);
  s.bind.port = taken;
  s.cors_origins = {"http://two.test"};
  auto second = make_router({route("/new", "N")}, first);
  const std::string where = "127.0.0.1:" + std::to_string(taken);
  CHECK_THROWS_WITH(server.reconfigure(s, second),
                    Catch::Contains("cannot listen on " + where + ": bind: ") &&
                        Catch::Contains("another process is using the port"));
  ::close(other);

  // An overlapping address on the port the server itself listens on.
  auto wide = loopback();
  wide.bind = {"0.0.0.0", port, false};
  CHECK_THROWS_WITH(
      server.reconfigure(wide, second),
      Catch::Contains("cannot listen on 0.0.0.0:" + std::to_string(port) + ": bind: ") &&
          Catch::Contains("the agent itself listens on 127.0.0.1:" + std::to_string(port) +
                          "; moving to an overlapping address on the same port takes a restart"));

  // Nothing changed: the old listener, settings, routes and origins serve on.
  CHECK(server.port() == port);
  CHECK(server.threads() == 1);
  CHECK(server.settings().bind.port == 0);
  CHECK(server.settings().cors_origins == settings.cors_origins);
  CHECK(server.router() == first);
  auto r = get(port, "/a", {{"Origin", "http://one.test"}});
  CHECK(r.body == "A");
  CHECK(r.header("access-control-allow-origin") == "http://one.test");
  CHECK(get(port, "/new").status == 404);
}

TEST_CASE("http: a slow request in flight across a daemon change completes") {
  TestLogger log;
  auto router = make_router({route("/slow", "slow", 600ms), route("/a", "A")});
  HttpServer server(loopback(1), router, log);
  server.start();
  const auto port = server.port();

  Reply slow;
  std::string error;
  std::thread client([&] {
    try {
      slow = get(port, "/slow");
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  auto& handler = handler_of(router->routes()[0]);
  eventually([&] { return handler.entered.load() != 0; });
  REQUIRE(handler.entered.load() == 1);
  server.reconfigure(loopback(2), router);
  CHECK(get(port, "/a").body == "A");  // the new daemon answers meanwhile
  client.join();
  CHECK(error == "");
  CHECK(slow.status == 200);
  CHECK(slow.body == "slow");
  CHECK(slow.header("connection") == "close");  // from the replaced daemon
  server.stop();
}

TEST_CASE("http: a kept-alive connection to a replaced daemon is closed after its next answer") {
  TestLogger log;
  auto router = make_router({route("/a", "A")});
  HttpServer server(loopback(1), router, log);
  server.start();
  const auto port = server.port();
  Conn kept("127.0.0.1", port);
  auto before = kept.get("/a");
  CHECK(before.status == 200);
  CHECK(before.header("connection") != "close");

  server.reconfigure(loopback(2), router);
  auto last = kept.get("/a");
  CHECK(last.status == 200);
  CHECK(last.header("connection") == "close");
  CHECK(kept.closed_by_server());
  // A new connection reaches the new daemon, which keeps it alive.
  Conn next("127.0.0.1", port);
  for (int i = 0; i < 3; ++i) {
    auto r = next.get("/a");
    CHECK(r.status == 200);
    CHECK(r.header("connection") != "close");
  }
  CHECK(server.threads() == 2);
}

TEST_CASE("http: request counters carry over to the next router by path") {
  auto a = route("/a", "A");
  Router first({a, route("/b", "B")});
  first.count(0, 200);
  first.count(1, 200);
  first.count(-1, 404);
  Router second({route("/c", "C"), a}, &first);
  first.count(0, 200);  // a request still finishing on the old router counts in the new one
  second.count(1, 304);
  second.count(1, 299);  // a status outside the table: "other"
  auto counts = second.request_counts();
  CHECK(count_of(counts, "/a", 200) == 2);
  CHECK(count_of(counts, "/a", 304) == 1);
  CHECK(count_of(counts, "/a", 0) == 1);
  CHECK(count_of(counts, "unmatched", 404) == 1);
  CHECK(count_of(counts, "/b", 200) == 0);
  CHECK(count_of(counts, "/c", 200) == 0);
  CHECK(counts.size() == 4);
  CHECK(counts.front().route == "unmatched");

  // Through the server, across a reload with a new daemon.
  TestLogger log;
  auto r1 = make_router({route("/a", "A"), route("/b", "B")});
  HttpServer server(loopback(1), r1, log);
  server.start();
  const auto port = server.port();
  get(port, "/a");
  get(port, "/a");
  get(port, "/b");
  get(port, "/nope");
  auto r2 = make_router({r1->routes()[0], route("/c", "C")}, r1);
  server.reconfigure(loopback(2), r2);
  get(port, "/a");
  get(port, "/nope");
  auto through = server.request_counts();
  CHECK(count_of(through, "/a", 200) == 3);
  CHECK(count_of(through, "unmatched", 404) == 2);
  CHECK(count_of(through, "/b", 200) == 0);
}

TEST_CASE("http: stop after reconfigure is clean and idempotent") {
  TestLogger log;
  auto router = make_router({route("/a", "A")});
  HttpServer server(loopback(1), router, log);
  server.start();
  const auto port = server.port();
  Conn kept("127.0.0.1", port);  // holds the first daemon in its drain
  kept.get("/a");
  server.reconfigure(loopback(2), router);
  server.reconfigure(loopback(3), router);
  CHECK(get(port, "/a").status == 200);

  const auto before = std::chrono::steady_clock::now();
  server.stop();
  CHECK(std::chrono::steady_clock::now() - before < 1500ms);  // does not wait out the drain
  CHECK(server.port() == 0);
  CHECK(refuses("127.0.0.1", port));
  CHECK(kept.closed_by_server());
  server.stop();

  // And a server that never started.
  HttpServer idle(loopback(), router, log);
  idle.reconfigure(loopback(2), router);
  CHECK(idle.threads() == 2);
  idle.stop();
}

namespace {

// Answers with what it was given of the request, one fact a line.
class EchoHandler final : public Handler {
 public:
  Response handle(const Request& r) override {
    std::string out = "method=" + std::string(r.method) + "\npath=" + std::string(r.path) +
                      "\nraw_query=" + std::string(r.raw_query) +
                      "\nprotocol=" + std::string(r.protocol) +
                      "\nlocal=" + std::string(r.local_address) + ":" +
                      std::to_string(r.local_port) + "\nbody=" + std::string(r.body) + "\n";
    for (auto& q : r.query)
      out += "param " + std::string(q.name) + "=" + std::string(q.value) + "\n";
    Response res;
    res.content_type = "text/plain";
    res.body = std::make_shared<const std::string>(std::move(out));
    return res;
  }
  std::string_view methods() const override { return "GET, HEAD, POST"; }
};

// Sends `request` as it is on a new connection and returns everything the server sent until it
// closed the connection (the request asks it to).
std::string exchange(std::uint16_t port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
    char chunk[4096];
    for (ssize_t n; (n = ::recv(fd, chunk, sizeof chunk, 0)) > 0;)
      out.append(chunk, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

Route echo_route(const std::string& path) {
  auto instance = std::make_shared<PluginInstance<Handler>>();
  instance->object = std::make_unique<EchoHandler>();
  return {path, std::move(instance)};
}

}  // namespace

TEST_CASE("http: a handler sees the raw query, the protocol and the local address and port") {
  TestLogger log;
  HttpServer server(loopback(1), make_router({echo_route("/e/*")}), log);
  server.start();
  const auto port = server.port();
  const std::string local = "local=127.0.0.1:" + std::to_string(port) + "\n";

  SECTION("a query: decoded into params, as sent in raw_query") {
    auto out = exchange(port,
                        "GET /e/a%20b?x=1+2&y=%2F%26&flag HTTP/1.1\r\nHost: h\r\n"
                        "Connection: close\r\n\r\n");
    CHECK_THAT(out, Catch::StartsWith("HTTP/1.1 200"));
    CHECK_THAT(out, Catch::Contains("path=/e/a b\nraw_query=x=1+2&y=%2F%26&flag\n"
                                    "protocol=HTTP/1.1\n" +
                                    local));
    CHECK_THAT(out, Catch::Contains("param x=1 2\nparam y=/&\nparam flag=\n"));
  }
  SECTION("no query, HTTP/1.0, a body") {
    auto out = exchange(port, "POST /e/p HTTP/1.0\r\nContent-Length: 5\r\n\r\nhello");
    CHECK_THAT(out, Catch::StartsWith("HTTP/1.1 200"));  // a server answers in its own version
    CHECK_THAT(out, Catch::Contains("method=POST\npath=/e/p\nraw_query=\nprotocol=HTTP/1.0\n" +
                                    local + "body=hello\n"));
  }
  SECTION("an encoded NUL in the path is refused, not cut short") {
    auto out = exchange(port, "GET /e/a%00.txt HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    CHECK_THAT(out, Catch::StartsWith("HTTP/1.1 400"));
    CHECK_THAT(out, Catch::Contains("{\"error\":{\"status\":400,\"message\":\"request path "
                                    "contains an encoded NUL byte (%00)\"}}"));
    // In the query it is only data.
    out = exchange(port, "GET /e/a?v=%00 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    CHECK_THAT(out, Catch::StartsWith("HTTP/1.1 200"));
    CHECK_THAT(out, Catch::Contains("raw_query=v=%00\n"));
  }
  server.stop();
}

// --- Compression: the server's, by body identity ------------------------------------------------

namespace {

// Answers the same Response every time: the same Body object, so the same identity.
class FixedHandler final : public Handler {
 public:
  explicit FixedHandler(Response r) : response_(std::move(r)) {}
  Response handle(const Request&) override { return response_; }

 private:
  Response response_;
};

Route fixed_route(const std::string& path, Response r) {
  auto instance = std::make_shared<PluginInstance<Handler>>();
  instance->object = std::make_unique<FixedHandler>(std::move(r));
  return {path, std::move(instance)};
}

std::string json_text(std::size_t bytes) {
  std::string text = "[";
  for (int i = 0; text.size() < bytes; ++i) text += std::to_string(1700000000 + i) + ",";
  text.resize(bytes - 1);
  return text + "]";
}

Response json_response(std::string text, std::optional<std::string> etag) {
  Response r;
  r.body = std::make_shared<const std::string>(std::move(text));
  if (etag) r.headers = {{"ETag", *etag}};
  return r;
}

const std::vector<std::pair<std::string, std::string>> kGzip = {{"Accept-Encoding", "gzip"}};

}  // namespace

TEST_CASE("http: a body with an ETag is gzipped once for every worker and connection") {
  TestLogger log;
  const std::string text = json_text(64 * 1024);
  HttpServer server(loopback(4), make_router({fixed_route("/v", json_response(text, "\"1\""))}),
                    log);
  server.start();
  const auto port = server.port();
  std::atomic<int> good{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i)
    clients.emplace_back([&] {
      Conn c("127.0.0.1", port);
      for (int j = 0; j < 10; ++j) {
        auto r = c.get("/v", kGzip);
        good += r.status == 200 && r.header("content-encoding") == "gzip" &&
                r.header("vary") == "Accept-Encoding" && kiwi::agent::gunzip(r.body) == text;
      }
    });
  for (auto& t : clients) t.join();
  CHECK(good.load() == 80);
  CHECK(server.gzip_cache().stats().compressions == 1);
  CHECK(server.gzip_cache().stats().entries == 1);

  // The identity response says it varies too, so a shared cache keeps the two apart.
  auto plain = get(port, "/v");
  CHECK(plain.body == text);
  CHECK(plain.header("content-encoding").empty());
  CHECK(plain.header("vary") == "Accept-Encoding");
  // q=0 refuses gzip.
  CHECK(get(port, "/v", {{"Accept-Encoding", "gzip;q=0"}}).body == text);
  server.stop();
}

TEST_CASE("http: a body without an ETag is gzipped per request and not kept") {
  TestLogger log;
  const std::string text = json_text(4096);
  HttpServer server(loopback(1),
                    make_router({fixed_route("/v", json_response(text, std::nullopt))}), log);
  server.start();
  auto r = get(server.port(), "/v", kGzip);
  CHECK(r.header("content-encoding") == "gzip");
  CHECK(r.header("vary") == "Accept-Encoding");
  CHECK(kiwi::agent::gunzip(r.body) == text);
  CHECK(server.gzip_cache().stats().entries == 0);
  CHECK(server.gzip_cache().stats().compressions == 0);
  server.stop();
}

TEST_CASE("http: small bodies and compressed types go out as they are") {
  TestLogger log;
  Response png = json_response(std::string(4096, 'x'), "\"p\"");
  png.content_type = "image/png";
  Response own = json_response(std::string(4096, 'y'), std::nullopt);
  own.headers = {{"Content-Encoding", "identity"}};  // the handler chose (a CGI program may)
  HttpServer server(loopback(1),
                    make_router({fixed_route("/small", json_response(json_text(1023), "\"s\"")),
                                 fixed_route("/png", png), fixed_route("/own", own)}),
                    log);
  server.start();
  const auto port = server.port();
  auto small = get(port, "/small", kGzip);
  CHECK(small.body == json_text(1023));
  CHECK(small.header("content-encoding").empty());
  CHECK(small.header("vary") == "Accept-Encoding");  // a later version may be larger
  auto image = get(port, "/png", kGzip);
  CHECK(image.body.size() == 4096);
  CHECK(image.header("content-encoding").empty());
  CHECK(image.header("vary").empty());
  auto mine = get(port, "/own", kGzip);
  CHECK(mine.body.size() == 4096);
  CHECK(mine.header("content-encoding") == "identity");
  CHECK(mine.header("vary").empty());
  CHECK(server.gzip_cache().stats().compressions == 0);
  server.stop();
}

TEST_CASE("http: HEAD has the GET's encoding and length, and a 304 keeps Vary") {
  TestLogger log;
  const std::string text = json_text(8192);
  HttpServer server(loopback(1), make_router({fixed_route("/v", json_response(text, "\"7\""))}),
                    log);
  server.start();
  Conn c("127.0.0.1", server.port());
  auto zipped = c.get("/v", kGzip);
  auto head = c.request("HEAD", "/v", kGzip);
  CHECK(head.status == 200);
  CHECK(head.header("content-encoding") == "gzip");
  CHECK(head.header("content-length") == std::to_string(zipped.body.size()));
  CHECK(head.header("vary") == "Accept-Encoding");
  auto plain_head = c.request("HEAD", "/v");
  CHECK(plain_head.header("content-encoding").empty());
  CHECK(plain_head.header("content-length") == std::to_string(text.size()));
  auto not_modified = c.get("/v", {{"Accept-Encoding", "gzip"}, {"If-None-Match", "\"7\""}});
  CHECK(not_modified.status == 304);
  CHECK(not_modified.header("vary") == "Accept-Encoding");
  CHECK(not_modified.header("etag") == "\"7\"");
  CHECK(not_modified.header("content-encoding").empty());
  // Still one compression: HEAD and GET share it.
  CHECK(server.gzip_cache().stats().compressions == 1);
  server.stop();
}
