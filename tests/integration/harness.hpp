// Test harness for integration tests: the real kiwi-agent binary in a temporary directory on a
// loopback port, and a minimal HTTP/1.1 client. Waits poll with deadlines; no fixed sleeps.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
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
#include "test_support.hpp"

extern char** environ;

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

// Starts `args` with stdout/stderr to files; returns the pid. A binary of this build goes through
// emulated() first (emulator.hpp).
inline pid_t spawn(const std::vector<std::string>& args, const fs::path& out, const fs::path& err) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("posix_spawn " + args[0] + " failed");
  return pid;
}

// Waits for `pid` at most `timeout`; kills it (SIGKILL) and fails if it does not exit.
inline int wait_exit(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  int status = 0;
  while (Clock::now() < deadline) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  throw std::runtime_error("process did not exit in time");
}

// Runs kiwi-agent with `args` to completion (for --check-config and friends).
inline ProcessResult run_agent_command(std::vector<std::string> args) {
  TempDir tmp;
  args.insert(args.begin(), KIWI_AGENT_BIN);
  pid_t pid = spawn(emulated(args), tmp.path / "out", tmp.path / "err");
  ProcessResult r;
  r.exit_code = wait_exit(pid, std::chrono::seconds(20));
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

// A loopback port that was free a moment ago (the kernel's choice for a socket bound to port 0).
inline int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    throw std::runtime_error("no free port");
  }
  close(fd);
  return ntohs(a.sin_port);
}

// kiwi-agent running on a temporary data dir and a kernel-chosen loopback port.
class Agent {
 public:
  // `extra_toml` is appended to a config that sets data_dir, snapshot_path and bind;
  // `collector_lines` and `http_lines` go into its [collector] and [http] tables; `data_dir`
  // replaces the temporary one; `agent_lines` go into [agent] (procfs/sysfs of a fixture tree).
  // The constructor returns once the agent serves its first sample (see start()).
  explicit Agent(const std::string& extra_toml = "", const std::string& collector_lines = "",
                 const std::string& http_lines = "", const std::string& data_dir = "",
                 const std::string& agent_lines = "", bool wait_for_first_sample = true) {
    config_path_ = dir_.path / "kiwi.toml";
    data_dir_ = data_dir.empty() ? dir_.path / "data" : fs::path(data_dir);
    write_config(extra_toml, collector_lines, http_lines, agent_lines);
    start(wait_for_first_sample);
  }
  ~Agent() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  // The config file: the fixed part (data_dir, plugin_dir, snapshot_path; bind unless
  // `http_lines` sets one) and the given lines, as the constructor describes.
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
    kill(pid_, SIGHUP);
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

  // Starts the agent and waits until it listens ("listening on http://127.0.0.1:PORT/" in its
  // log) and, unless told not to, until /api/current has its first sample.
  void start(bool wait_for_first_sample = true) {
    pid_ = spawn(emulated({KIWI_AGENT_BIN, "--config", config_path_.string()}),
                 dir_.path / "stdout", dir_.path / "stderr");
    auto deadline = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < deadline) {
      std::string log = stderr_text();
      // "http://" or, with [http.tls], "https://".
      auto at = log.find("listening on http");
      if (at != std::string::npos) at = log.find("://127.0.0.1:", at);
      if (at != std::string::npos && log.find('/', at + 13) != std::string::npos) {
        port_ = std::stoi(log.substr(at + 13));
        if (wait_for_first_sample) wait_first_sample(deadline);
        return;
      }
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("kiwi-agent exited at start-up:\n" + log);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    throw std::runtime_error("kiwi-agent did not start listening:\n" + stderr_text());
  }

  // Sends `sig` and returns the exit code.
  int stop(int sig = SIGTERM) {
    kill(pid_, sig);
    int code = wait_exit(pid_, std::chrono::seconds(20));
    pid_ = -1;
    return code;
  }

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const fs::path& dir() const { return dir_.path; }
  fs::path db_path() const { return data_dir_ / "kiwi.db"; }
  std::string stderr_text() const { return read_text(dir_.path / "stderr"); }

 private:
  // The port opens before the first sample is taken (503 until then).
  void wait_first_sample(Clock::time_point deadline) {
    HttpClient c(port_);
    while (Clock::now() < deadline) {
      if (c.get("/api/current").status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    throw std::runtime_error("no first sample:\n" + stderr_text());
  }

  TempDir dir_;
  fs::path config_path_;
  fs::path data_dir_;
  pid_t pid_ = -1;
  int port_ = 0;
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

}  // namespace kiwi_test
