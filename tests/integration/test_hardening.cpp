// Issue 16 on the real binary: a safe snapshot file (modes, no link followed, no directory others
// can write), the last log line of an agent a plugin crashed, and an open-file limit that fits
// max_connections.
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <memory>
#include <optional>
#include <sstream>

#include <catch2/catch.hpp>

#include "checks.hpp"

using namespace kiwi_test;
using namespace std::chrono_literals;

namespace {

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) throw std::runtime_error("lstat " + p.string() + " failed");
  return st.st_mode & 07777;
}

// The test process's umask for one scope; the agents it starts inherit it.
struct Umask {
  mode_t old;
  explicit Umask(mode_t m) : old(::umask(m)) {}
  ~Umask() { ::umask(old); }
};

// No core file from the crashes these tests cause (the agents inherit the limit).
void no_core_files() {
  const rlimit none{0, 0};
  ::setrlimit(RLIMIT_CORE, &none);
}

// The test process's soft open-file limit for one scope; the agents it starts inherit it.
struct OpenFileLimit {
  rlimit old{};
  explicit OpenFileLimit(rlim_t soft) {
    ::getrlimit(RLIMIT_NOFILE, &old);
    rlimit l = old;
    l.rlim_cur = soft;
    if (::setrlimit(RLIMIT_NOFILE, &l) != 0) throw std::runtime_error("setrlimit failed");
  }
  ~OpenFileLimit() { ::setrlimit(RLIMIT_NOFILE, &old); }
};

// The soft "Max open files" of a process, from /proc/PID/limits.
long soft_open_files(pid_t pid) {
  std::istringstream in(read_text("/proc/" + std::to_string(pid) + "/limits"));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("Max open files", 0) == 0) return std::stol(line.substr(14));
  throw std::runtime_error("no Max open files line");
}

// A config with its own data_dir, snapshot path and port, and `extra`.
std::string config_in(const TempDir& dir, const fs::path& data, const fs::path& snapshot,
                      const std::string& extra = "") {
  const std::string file = (dir.path / "kiwi.toml").string();
  write_text(file, "[agent]\ndata_dir = \"" + data.string() +
                       "\"\nplugin_dir = \"" KIWI_PLUGIN_DIR
                       "\"\n[http]\nbind = \"127.0.0.1:0\"\n[collector]\nsnapshot_path = \"" +
                       snapshot.string() + "\"\n" + extra);
  return file;
}

}  // namespace

TEST_CASE("hardening: under umask 000 the agent's directories are 0755 and its files 0644") {
  TempDir tmp;
  const fs::path data = tmp.path / "state" / "data";
  const fs::path snap = tmp.path / "run" / "kiwi" / "current.json";
  const std::string file = config_in(tmp, data, snap);
  AgentOptions options;
  options.config_file = file;
  options.ready = Ready::started;
  std::optional<Agent> agent;
  {
    Umask scope(0);
    agent.emplace(options);
  }
  REQUIRE(eventually([&] { return fs::exists(snap) && fs::exists(data / "kiwi.db-wal"); }, 20s));
  for (auto& d : {tmp.path / "state", data, tmp.path / "run", snap.parent_path()}) {
    INFO(d);
    CHECK(mode_of(d) == 0755);
  }
  // (No -shm file: the store keeps its WAL index in memory.)
  for (auto& f :
       {snap, fs::path(snap.string() + ".lock"), data / "kiwi.db", data / "kiwi.db-wal"}) {
    INFO(f);
    CHECK(mode_of(f) == 0644);
  }
  CHECK(agent->stop(SIGTERM) == 0);
}

TEST_CASE("hardening: a symbolic link planted at the snapshot's temporary name is not followed") {
  // The agent used to write "<snapshot_path>.tmp" (O_CREAT|O_TRUNC) and rename it: another user
  // who could plant that name made root overwrite the file it pointed to.
  TempDir victim_dir;
  const fs::path victim = victim_dir.path / "precious";
  write_text(victim, "precious\n");
  Agent agent;
  const fs::path snap = agent.dir() / "run/current.json";
  REQUIRE(eventually([&] { return fs::exists(snap); }));
  fs::create_symlink(victim, snap.string() + ".tmp");
  HttpClient c(agent.port());
  const auto seq = sequence_of(c);
  REQUIRE(eventually([&] { return sequence_of(c) >= seq + 3; }));  // three more writes
  // The file itself is still written (through a new temporary name each time).
  REQUIRE(eventually([&] {
    auto d = parse_json(read_text(snap));
    return d.IsObject() && d.HasMember("sequence") && d["sequence"].GetUint64() > seq + 2;
  }));
  CHECK(read_text(victim) == "precious\n");
  CHECK(fs::is_symlink(snap.string() + ".tmp"));
  CHECK(c.get("/api/health").status == 200);
}

TEST_CASE(
    "hardening: a snapshot directory or data_dir that every user can write is refused at start") {
  TempDir tmp;
  const fs::path open_dir = tmp.path / "open";
  fs::create_directory(open_dir);
  fs::permissions(open_dir, fs::perms::all);  // 0777
  SECTION("the snapshot file's directory") {
    const fs::path snap = open_dir / "current.json";
    auto r = run_agent_command({"--config", config_in(tmp, tmp.path / "data", snap)});
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("error: snapshot file " + snap.string() + ": directory " +
                                      open_dir.string() +
                                      " is writable by every user (mode 0777): another user "
                                      "could replace the files the agent writes there; make it "
                                      "writable by the agent's user alone (chmod go-w " +
                                      open_dir.string() + ") or choose a directory that is"));
    CHECK(fs::is_empty(open_dir));  // nothing written there
  }
  SECTION("data_dir") {
    auto r = run_agent_command(
        {"--config", config_in(tmp, open_dir, tmp.path / "run" / "current.json")});
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err,
               Catch::Contains("error: data_dir " + open_dir.string() + ": directory " +
                               open_dir.string() + " is writable by every user (mode 0777)"));
    CHECK(fs::is_empty(open_dir));
  }
}

TEST_CASE("hardening: a sensor that crashes the agent is named in its last log line") {
  no_core_files();
  TempDir tmp;
  const std::string plugin = KIWI_TEST_PLUGIN_DIR "/test-crash_sensor.so";
  const std::string file = config_in(tmp, tmp.path / "data", tmp.path / "run" / "current.json",
                                     "[[sensor]]\nplugin = \"" + plugin + "\"\nname = \"crash\"\n");
  AgentOptions options;
  options.config_file = file;
  options.ready = Ready::started;  // it crashes at its first sample, maybe before it listens
  Agent agent(options);
  // Killed by the signal itself (the kernel's exit status and core dump), not an exit code.
  CHECK(agent.stop(0) == 128 + SIGSEGV);  // signal 0: only waits for it
  const std::string err = agent.stderr_text();
  CHECK_THAT(err,
             Catch::Contains("kiwi-agent: error: SIGSEGV (invalid memory access) in sensor "
                             "crash (" +
                             plugin + "), thread kiwi-sampler; the agent stops with the signal\n"));
}

TEST_CASE("hardening: a route handler that crashes the agent is named in its last log line") {
  no_core_files();
  const std::string plugin = KIWI_TEST_PLUGIN_DIR "/test-crash_handler.so";
  // The only route: no /api/current to wait for a first sample on.
  Agent agent("[[route]]\npath = \"/crash\"\nhandler = \"" + plugin + "\"\n", "", "", "", "",
              false);
  {
    HttpClient c(agent.port());
    try {
      c.get("/crash");
    } catch (const std::exception&) {
      // The connection goes with the process.
    }
  }
  CHECK(agent.stop(0) == 128 + SIGSEGV);  // signal 0: only waits for it
  CHECK_THAT(
      agent.stderr_text(),
      Catch::Contains("kiwi-agent: error: SIGSEGV (invalid memory access) in route /crash (" +
                      plugin + "), thread "));
}

TEST_CASE("hardening: SIGABRT sent by another process (systemd's watchdog) names the sender") {
  no_core_files();
  Agent agent;
  REQUIRE(kill(agent.pid(), SIGABRT) == 0);
  CHECK(agent.stop(0) == 128 + SIGABRT);  // signal 0: only waits for it
  CHECK_THAT(agent.stderr_text(),
             Catch::Contains("kiwi-agent: error: SIGABRT (abort) sent by process " +
                             std::to_string(getpid()) + ", thread "));
}

TEST_CASE("hardening: the errors libmicrohttpd answers by itself have the API's JSON error body") {
  if (!KIWI_MHD_STATIC)
    skip_test(
        "this build links Debian's libmicrohttpd, whose own error pages are HTML; the static one "
        "tools/setup-mhd.sh builds (patched, tools/mhd-json-errors.patch) answers in JSON");
  Agent agent;
  const std::string big(20000, 'x');
  std::string many_args;  // 8 KB, within the request-line limit: 2,000 arguments
  for (int i = 0; i < 2000; ++i) many_args += "a=1&";
  struct Case {
    const char* what;
    std::string request;
    int status;
  };
  const Case cases[] = {
      {"an HTTP version it does not speak", "GET /api/health HTTP/2.0\r\nHost: a\r\n\r\n", 505},
      {"a Content-Length that is not a number",
       "POST /api/health HTTP/1.1\r\nHost: a\r\nContent-Length: abc\r\n\r\n", 400},
      {"a Content-Length too large",
       "POST /api/health HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n",
       413},

      {"a bad chunked body",
       "POST /api/health HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n", 400},
      {"headers beyond the connection's memory",
       "GET /api/health HTTP/1.1\r\nHost: a\r\nX-Big: " + big + "\r\n\r\n", 431},
      // 0.9.75 queued the 431, then went on to read headers and closed the connection unanswered.
      {"more query arguments than the connection's memory holds",
       "GET /api/history?" + many_args + " HTTP/1.1\r\nHost: a\r\n\r\n", 431},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    HttpClient client(agent.port());
    client.send_raw(c.request);
    const HttpResponse r = client.read_response();
    CHECK(r.status == c.status);
    // One response, then the connection closes (0.9.75 sent the header block of a bad
    // Content-Length's 400 twice, the second one as the body).
    CHECK(r.body.find("\r\n") == std::string::npos);
    CHECK(eventually([&] { return client.closed_by_peer(); }, 5s));
    CHECK(r.header("content-type") == "application/json");
    INFO(r.body);
    const auto d = parse_json(r.body);
    REQUIRE(d.IsObject());
    REQUIRE(d.HasMember("error"));
    CHECK(d["error"]["status"].GetInt() == c.status);
    CHECK(d["error"]["message"].IsString());
    CHECK(d["error"]["message"].GetStringLength() > 0);
  }
  CHECK(HttpClient(agent.port()).get("/api/health").status == 200);
}

TEST_CASE("hardening: a max_connections above the open-file limit raises it or the log says why") {
  // 1,000 connections need 2 x 1,000 + 256 descriptors (a reload runs two sets of workers).
  const std::string http = "max_connections = 1000\n";
  SECTION("raised as far as needed: 600 connections open at once on a soft limit of 512") {
    rlimit lim{};
    ::getrlimit(RLIMIT_NOFILE, &lim);
    INFO("this test needs a hard RLIMIT_NOFILE of at least 2,256 + 600 (ulimit -Hn)");
    REQUIRE(lim.rlim_max >= 2856);
    std::optional<Agent> agent;
    {
      OpenFileLimit scope(512);
      agent.emplace("", "", http);
    }
    CHECK(soft_open_files(agent->pid()) == 2256);
    CHECK_THAT(agent->stderr_text(),
               Catch::Contains("info: http: raised the open-file limit from 512 to 2256 for "
                               "max_connections 1000"));
    // Past 512 descriptors the agent's accept() would have failed with EMFILE: each of these
    // is answered, and again once all of them are open.
    std::vector<std::unique_ptr<HttpClient>> clients;
    for (int i = 0; i < 600; ++i) {
      clients.push_back(std::make_unique<HttpClient>(agent->port()));
      REQUIRE(clients.back()->get("/api/health").status == 200);
    }
    int answered = 0;
    for (auto& c : clients) answered += c->get("/api/health").status == 200;
    CHECK(answered == 600);
  }
  SECTION("a hard limit below it: the agent starts and the log names the limit") {
    TempDir tmp;
    const std::string file = config_in(tmp, tmp.path / "data", tmp.path / "run" / "current.json");
    std::string text = read_text(file);
    text.insert(text.find("[http]\n") + 7, http);
    write_text(file, text);
    AgentOptions options;
    options.config_file = file;
    options.prefix = {"/usr/bin/prlimit", "--nofile=512:512", "--"};
    options.ready = Ready::started;
    Agent agent(options);
    CHECK(eventually([&] { return agent.stderr_text().find("listening on") != std::string::npos; },
                     20s));
    CHECK_THAT(agent.stderr_text(),
               Catch::Contains("warn: http: max_connections 1000 needs about 2256 file "
                               "descriptors and the limit (RLIMIT_NOFILE) is 512; past it new "
                               "connections wait for a free one (systemd: LimitNOFILE=)"));
    CHECK(soft_open_files(agent.pid()) == 512);
    CHECK(agent.stop(SIGTERM) == 0);
  }
}
