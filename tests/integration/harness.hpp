// Test harness for integration tests: the real kiwi-agent binary in a temporary directory on a
// loopback port (Agent, the one way a test starts it), and a minimal HTTP/1.1 client. Waits poll
// with deadlines; no fixed sleeps.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "emulator.hpp"
#include "process.hpp"
#include "test_support.hpp"

namespace kiwi_test {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

inline std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_text(const fs::path& p, std::string_view text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

struct ProcessResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs kiwi-agent with `args` to completion (for --check-config and friends), under `prefix` if
// given (a program that runs it: setpriv, prlimit), and gives it 20 s.
inline ProcessResult run_agent_command(std::vector<std::string> args,
                                       std::vector<std::string> prefix = {}) {
  TempDir tmp;
  args.insert(args.begin(), KIWI_AGENT_BIN);
  for (auto& word : emulated(args)) prefix.push_back(word);
  Process agent(prefix, {tmp.path / "out", tmp.path / "err", {}});
  ProcessResult r;
  r.exit_code = agent.stop(0, std::chrono::seconds(20));
  r.out = read_text(tmp.path / "out");
  r.err = read_text(tmp.path / "err");
  return r;
}

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

// The server closed the connection (end of stream, or a reset).
struct ConnectionClosed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One keep-alive HTTP/1.1 connection to 127.0.0.1:port.
class HttpClient {
 public:
  explicit HttpClient(int port) : port_(port) { connect_socket(); }
  ~HttpClient() {
    if (fd_ >= 0) close(fd_);
  }
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  void send_raw(std::string_view bytes) {
    last_sent_ = Clock::now();
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0 && (errno == EPIPE || errno == ECONNRESET))
        throw ConnectionClosed("connection closed by the server before the request was sent");
      if (n <= 0) throw std::runtime_error("send failed");
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  HttpResponse request(const std::string& method, const std::string& target,
                       const std::vector<std::pair<std::string, std::string>>& headers = {},
                       const std::string& body = "") {
    std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    for (auto& [k, v] : headers) req += k + ": " + v + "\r\n";
    if (!body.empty()) req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    req += "\r\n" + body;
    const auto previous = last_sent_;
    try {
      send_raw(req);
      return read_response(method == "HEAD");
    } catch (const ConnectionClosed&) {
      // A server may close a kept-alive connection once it has been idle for the keep-alive time
      // (5 s by default), even with a request just sent: libmicrohttpd 0.9.75 runs its idle check
      // before it reads the sockets that are ready, so a stall of the machine or of the agent
      // does it. HTTP clients then retry an idempotent request on a new connection (RFC 9112,
      // section 9.3.1); this one does, once, only when the previous request on the connection
      // was sent at least 4 s before. A server that closes connections it should keep open
      // still fails here.
      const bool idle_drop = previous != Clock::time_point{} && buf_.empty() &&
                             (method == "GET" || method == "HEAD") &&
                             Clock::now() - previous >= std::chrono::seconds(4);
      if (!idle_drop) throw;
      close(fd_);
      fd_ = -1;
      connect_socket();
      send_raw(req);
      return read_response(method == "HEAD");
    }
  }
  HttpResponse get(const std::string& target,
                   const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    return request("GET", target, headers);
  }

  HttpResponse read_response(bool head = false) {
    while (buf_.find("\r\n\r\n") == std::string::npos) fill();
    auto end = buf_.find("\r\n\r\n");
    std::string head_text = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    HttpResponse r;
    std::istringstream lines(head_text);
    std::string line;
    std::getline(lines, line);
    r.status = std::stoi(line.substr(9, 3));
    while (std::getline(lines, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
    }
    if (!head && r.status != 304 && r.status != 204 && r.header("transfer-encoding") == "chunked") {
      // RFC 9112 section 7.1: chunks of hex-size CRLF data CRLF, up to a last one of size 0 (and
      // no trailers: the agent sends none). A connection closed before it: ConnectionClosed.
      for (;;) {
        while (buf_.find("\r\n") == std::string::npos) fill();
        const std::size_t line_end = buf_.find("\r\n");
        const std::size_t size = std::stoul(buf_.substr(0, line_end), nullptr, 16);
        while (buf_.size() < line_end + 2 + size + 2) fill();
        r.body.append(buf_, line_end + 2, size);
        buf_.erase(0, line_end + 2 + size + 2);
        if (size == 0) return r;
      }
    }
    std::size_t length =
        r.headers.count("content-length") ? std::stoul(r.headers["content-length"]) : 0;
    if (head || r.status == 304 || r.status == 204) length = 0;
    while (buf_.size() < length) fill();
    r.body = buf_.substr(0, length);
    buf_.erase(0, length);
    return r;
  }

  // True if the server closed the connection (read returns 0).
  bool closed_by_peer() {
    char c;
    ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0;
  }

 private:
  void connect_socket() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval tv{10, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      close(fd_);
      fd_ = -1;
      throw std::runtime_error("connect to port " + std::to_string(port_) + " failed");
    }
  }
  void fill() {
    char chunk[65536];
    ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
    if (n > 0) {
      buf_.append(chunk, static_cast<std::size_t>(n));
      return;
    }
    const double waited = std::chrono::duration<double>(Clock::now() - last_sent_).count();
    const std::string when = std::to_string(waited) + " s after the request, " +
                             std::to_string(buf_.size()) + " bytes of the response read";
    if (n == 0 || errno == ECONNRESET)
      throw ConnectionClosed("connection closed by the server while reading (" + when + ")");
    throw std::runtime_error(std::string(errno == EAGAIN || errno == EWOULDBLOCK
                                             ? "no answer within 10 s while reading"
                                             : std::strerror(errno)) +
                             " (" + when + ")");
  }
  int port_;
  int fd_ = -1;
  std::string buf_;
  Clock::time_point last_sent_{};
};

// What Agent waits for before its constructor (or start()) returns.
enum class Ready {
  started,       // nothing: the process runs (the test waits for what it needs itself)
  listening,     // its log says "listening on http(s)://ADDRESS:PORT/"; port() is known
  first_sample,  // listening, and /api/current has its first sample (200, not 503)
};

// How Agent starts kiwi-agent. The defaults: the harness's config, a temporary data dir, a
// kernel-chosen loopback port, the test's environment, the first sample waited for.
struct AgentOptions {
  // The config file the harness writes (config_path()): [agent] data_dir, plugin_dir and
  // `agent_lines` (procfs/sysfs of a fixture tree); [http] bind (127.0.0.1:0 unless `http_lines`
  // has a bind) and `http_lines`; [collector] snapshot_path (dir()/run/current.json) and
  // `collector_lines`; then `toml`.
  std::string toml;
  std::string collector_lines;
  std::string http_lines;
  std::string agent_lines;
  fs::path data_dir;  // instead of dir()/data
  // A config of the test's own: the agent runs on this file and the harness writes none.
  fs::path config_file;
  std::vector<std::string> args;    // more arguments, after --config FILE
  std::vector<std::string> prefix;  // a program it runs under: {"/usr/bin/prlimit", "...", "--"}
  std::map<std::string, std::optional<std::string>> env;  // set (nullopt: unset) for it alone
  fs::path stderr_path;  // its log, instead of dir()/stderr (the file is truncated, not replaced)
  Ready ready = Ready::first_sample;
  std::chrono::milliseconds start_timeout = std::chrono::seconds(20);
};

// kiwi-agent running on a temporary directory, the one way an integration test starts it: on its
// config, under the emulator of a cross build (emulator.hpp) and any `prefix`, its stdout and
// stderr in files, waited for by the log line or the first sample (Ready), never by a sleep. It
// runs in a process group of its own and dies with the test process (process.hpp); the destructor
// kills it (SIGKILL to the group) and reaps it whatever way the test leaves, so a failed REQUIRE
// stops it too.
class Agent {
 public:
  explicit Agent(AgentOptions options) : options_(std::move(options)) {
    config_path_ = options_.config_file.empty() ? dir_.path / "kiwi.toml" : options_.config_file;
    data_dir_ = options_.data_dir.empty() ? dir_.path / "data" : options_.data_dir;
    stderr_path_ = options_.stderr_path.empty() ? dir_.path / "stderr" : options_.stderr_path;
    if (options_.config_file.empty())
      write_config(options_.toml, options_.collector_lines, options_.http_lines,
                   options_.agent_lines);
    start(options_.ready);
  }
  // `extra_toml` is appended to a config that sets data_dir, snapshot_path and bind;
  // `collector_lines` and `http_lines` go into its [collector] and [http] tables; `data_dir`
  // replaces the temporary one; `agent_lines` go into [agent] (procfs/sysfs of a fixture tree).
  // The constructor returns once the agent serves its first sample (once it listens, with
  // `wait_for_first_sample` false).
  explicit Agent(const std::string& extra_toml = "", const std::string& collector_lines = "",
                 const std::string& http_lines = "", const std::string& data_dir = "",
                 const std::string& agent_lines = "", bool wait_for_first_sample = true)
      : Agent(options(extra_toml, collector_lines, http_lines, data_dir, agent_lines,
                      wait_for_first_sample)) {}
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // The config file: the fixed part (data_dir, plugin_dir, snapshot_path; bind unless
  // `http_lines` sets one) and the given lines, as AgentOptions describes.
  void write_config(const std::string& extra_toml, const std::string& collector_lines = "",
                    const std::string& http_lines = "", const std::string& agent_lines = "") {
    const bool sets_bind = http_lines.find("bind") != std::string::npos;
    write_text(config_path_,
               "[agent]\ndata_dir = \"" + data_dir_.string() +
                   "\"\nplugin_dir = \"" KIWI_PLUGIN_DIR "\"\n" + agent_lines + "[http]\n" +
                   (sets_bind ? "" : "bind = \"127.0.0.1:" + std::to_string(port_) + "\"\n") +
                   http_lines + "\n[collector]\nsnapshot_path = \"" +
                   (dir_.path / "run/current.json").string() + "\"\n" + collector_lines + "\n" +
                   extra_toml);
  }
  const fs::path& config_path() const { return config_path_; }

  // Sends SIGHUP and waits for the agent's verdict: the log line "reloaded ..." or
  // "reload failed ...", which it returns.
  std::string reload() {
    const std::size_t before = stderr_text().size();
    kill(pid(), SIGHUP);
    auto deadline = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < deadline) {
      std::string log = stderr_text().substr(before);
      for (const char* key : {"info: reloaded ", "error: reload failed"})
        if (auto at = log.find(key); at != std::string::npos) {
          auto end = log.find('\n', at);
          if (end != std::string::npos) return log.substr(at, end - at);
        }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    throw std::runtime_error("no reload verdict in the log:\n" + stderr_text());
  }

  // Starts the agent (again, after stop(): on the same data dir, config and port) and waits for
  // `ready`; throws with its log if it exits first or the start timeout passes.
  void start(Ready ready) {
    std::vector<std::string> argv = options_.prefix;
    for (auto& word : emulated({KIWI_AGENT_BIN, "--config", config_path_.string()}))
      argv.push_back(word);
    argv.insert(argv.end(), options_.args.begin(), options_.args.end());
    process_ = Process(argv, {dir_.path / "stdout", stderr_path_, options_.env});
    if (ready == Ready::started) return;
    const auto deadline = Clock::now() + options_.start_timeout;
    wait_listening(deadline);
    if (ready == Ready::first_sample) wait_first_sample(deadline);
  }
  void start(bool wait_for_first_sample = true) {
    start(wait_for_first_sample ? Ready::first_sample : Ready::listening);
  }

  // Sends `sig` (0: none, only waits) and returns the exit code (128 + a signal that ended it);
  // one that has not exited in 20 s is killed and this throws.
  int stop(int sig = SIGTERM) { return process_.stop(sig, std::chrono::seconds(20)); }

  int port() const { return port_; }
  pid_t pid() const { return process_.pid(); }
  const fs::path& dir() const { return dir_.path; }
  fs::path db_path() const { return data_dir_ / "kiwi.db"; }
  std::string stderr_text() const { return read_text(stderr_path_); }

  // The port of the log's "listening on http://127.0.0.1:PORT/" (https:// with [http.tls], any
  // bind address), 0 before the whole line is there.
  static int listening_port(const std::string& log) {
    const auto at = log.find("listening on http");
    const auto scheme = at == std::string::npos ? at : log.find("://", at);
    const auto slash = scheme == std::string::npos ? scheme : log.find('/', scheme + 3);
    if (slash == std::string::npos) return 0;
    const auto colon = log.rfind(':', slash);
    if (colon == std::string::npos || colon < scheme + 3) return 0;
    return std::stoi(log.substr(colon + 1, slash - colon - 1));
  }

 private:
  static AgentOptions options(const std::string& extra_toml, const std::string& collector_lines,
                              const std::string& http_lines, const std::string& data_dir,
                              const std::string& agent_lines, bool wait_for_first_sample) {
    AgentOptions o;
    o.toml = extra_toml;
    o.collector_lines = collector_lines;
    o.http_lines = http_lines;
    o.agent_lines = agent_lines;
    o.data_dir = data_dir;
    o.ready = wait_for_first_sample ? Ready::first_sample : Ready::listening;
    return o;
  }
  void wait_listening(Clock::time_point deadline) {
    while (Clock::now() < deadline) {
      const std::string log = stderr_text();
      if (int port = listening_port(log)) {
        port_ = port;
        return;
      }
      if (auto code = process_.poll())
        throw std::runtime_error("kiwi-agent exited at start-up (exit code " +
                                 std::to_string(*code) + "):\n" + log);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    throw std::runtime_error("kiwi-agent did not start listening:\n" + stderr_text());
  }
  // The port opens before the first sample is taken (503 until then).
  void wait_first_sample(Clock::time_point deadline) {
    HttpClient c(port_);
    while (Clock::now() < deadline) {
      if (c.get("/api/current").status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    throw std::runtime_error("no first sample:\n" + stderr_text());
  }

  TempDir dir_;  // first: removed after the process is gone
  AgentOptions options_;
  fs::path config_path_;
  fs::path data_dir_;
  fs::path stderr_path_;
  int port_ = 0;
  Process process_;
};

// Stops one thread of a running process, found by its name (/proc/PID/task/TID/comm), for the
// object's life, as a stuck disk or a hung system call would: ptrace(PTRACE_INTERRUPT) stops that
// thread alone, the others run on. Throws if no thread has that name.
class FrozenThread {
 public:
  FrozenThread(pid_t pid, const std::string& name) {
    for (auto& t : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
      std::string comm = read_text(t.path() / "comm");
      while (!comm.empty() && comm.back() == '\n') comm.pop_back();
      if (comm == name) tid_ = std::stoi(t.path().filename().string());
    }
    if (tid_ <= 0)
      throw std::runtime_error("no thread named " + name + " in " + std::to_string(pid));
    if (ptrace(PTRACE_SEIZE, tid_, nullptr, nullptr) != 0 ||
        ptrace(PTRACE_INTERRUPT, tid_, nullptr, nullptr) != 0) {
      // qemu-user (the cross test) runs this test program and has no ptrace for it.
      if (errno == ENOSYS && !emulator().empty())
        skip_test("ptrace is not available under the emulator (" + emulator().front() + ")");
      throw std::runtime_error("ptrace " + std::to_string(tid_) + ": " + std::strerror(errno));
    }
    int status = 0;
    waitpid(tid_, &status, __WALL);
  }
  // Lets the thread go on. If it died meanwhile (its process was killed), it waits for its
  // tracer: reaping it here lets the process be reaped.
  ~FrozenThread() {
    if (ptrace(PTRACE_DETACH, tid_, nullptr, nullptr) != 0) waitpid(tid_, nullptr, __WALL);
  }
  FrozenThread(const FrozenThread&) = delete;
  FrozenThread& operator=(const FrozenThread&) = delete;

 private:
  pid_t tid_ = -1;
};

// Polls `pred` until it is true or `timeout` passes.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

// A server of the test's (Prometheus, Alertmanager): its own temporary directory, a loopback port,
// its process, stopped (SIGTERM, 20 s) when the object goes; the process dies with the test's
// in any case (process.hpp).
struct TestServer {
  TempDir dir;
  int port = free_port();
  Process process;

  TestServer() = default;
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;
  ~TestServer() {
    if (!process.started()) return;
    try {
      process.stop(SIGTERM, std::chrono::seconds(20));
    } catch (...) {
    }
  }
};

// Starts a server of the test's (Prometheus, Alertmanager) on a loopback port and waits until
// `ready()`: `argv_for(port)` is its command line, `out` and `err` its output. The port is free
// when chosen, but another test's listener may take it first: the server then exits at once, and
// is started again on another port (three tries). A slow start (a loaded machine, sanitizer
// builds beside it) gets a minute; one that never gets ready fails with `log_tail()`.
template <class Argv, class Ready, class LogTail>
void start_server(const std::string& what, Process& process, int& port, Argv argv_for,
                  const fs::path& out, const fs::path& err, Ready ready, LogTail log_tail) {
  for (int attempt = 1;; ++attempt) {
    process = Process(argv_for(port), {out, err, {}});
    std::optional<int> exited;
    if (eventually([&] { return (exited = process.poll()) || ready(); },
                   std::chrono::seconds(60)) &&
        !exited)
      return;
    INFO(what << " on 127.0.0.1:" << port << " (attempt " << attempt
              << "), its log ends: " << log_tail());
    if (!exited || attempt == 3) FAIL(what << " did not get ready");
    port = free_port();
  }
}

}  // namespace kiwi_test
