// Live reconfiguration (SIGHUP) and sensor deadlines, on the real binary: a reload applies a new
// configuration whole or changes nothing, keeps what did not change running, and no sensor, slow
// or hung, stalls sampling, start-up, reload or shutdown.
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>

#include "checks.hpp"

using namespace kiwi_test;
using namespace std::chrono_literals;

namespace {

const std::string kSlowPlugin = KIWI_TEST_PLUGIN_DIR "/test-slow_sensor.so";

// A [[sensor]] of the test plugin slow_sensor (tests/plugins/slow_sensor.cpp). Each instance
// emits the same series, so each is labelled with its name (instance = "<name>") unless
// `entry_lines` gives labels itself: a series has one writer (docs/plugins.md).
std::string slow_sensor(const std::string& name, const std::string& options = "",
                        const std::string& entry_lines = "",
                        const std::string& plugin = kSlowPlugin) {
  const std::string labels = entry_lines.find("labels") == std::string::npos
                                 ? "labels = { instance = \"" + name + "\" }\n"
                                 : "";
  return "[[sensor]]\nplugin = \"" + plugin + "\"\nname = \"" + name + "\"\n" + labels +
         entry_lines + "[sensor.options]\n" + options + "\n";
}

rapidjson::Document current(HttpClient& c) {
  return parse_json(c.get("/api/current").body);
}

// The value of `metric` in sensor `sensor` of /api/current; -1 when absent.
double metric_of(const rapidjson::Document& d, const char* sensor, const std::string& metric) {
  if (!d.HasMember("sensors") || !d["sensors"].HasMember(sensor)) return -1;
  for (auto& m : d["sensors"][sensor]["metrics"].GetArray())
    if (m["name"].GetString() == metric) return m["value"].GetDouble();
  return -1;
}

std::string status_of(const rapidjson::Document& d, const char* sensor) {
  if (!d["sensors"].HasMember(sensor)) return "missing";
  return d["sensors"][sensor]["status"].GetString();
}

// Sample timestamps the history holds from `since` on (to `until`, if given).
std::vector<double> history_timestamps(HttpClient& c, double since, double until = 0) {
  auto d = parse_json(c.get("/api/history?limit=1000&since=" + std::to_string(since) +
                            (until > 0 ? "&until=" + std::to_string(until) : ""))
                          .body);
  std::vector<double> out;
  for (auto& t : d["timestamps"].GetArray()) out.push_back(t.GetDouble());
  return out;
}

double largest_step(const std::vector<double>& ts) {
  double step = 0;
  for (std::size_t i = 1; i < ts.size(); ++i) step = std::max(step, ts[i] - ts[i - 1]);
  return step;
}

// Whether signal `sig` was sent to process `pid` and not taken yet: the agent takes its signals
// with sigwait(), so one that has left the pending set has been taken. (Under qemu-user the
// emulator takes every signal as it comes: there this only says that it came.)
bool signal_pending(pid_t pid, int sig) {
  const std::string status = read_text("/proc/" + std::to_string(pid) + "/status");
  for (const std::string field : {"\nShdPnd:\t", "\nSigPnd:\t"}) {
    const auto at = status.find(field);
    if (at == std::string::npos) continue;
    const unsigned long long mask = std::stoull(status.substr(at + field.size(), 16), nullptr, 16);
    if (mask & (1ull << (sig - 1))) return true;
  }
  return false;
}

std::size_t count_of(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// True if nothing listens on 127.0.0.1:port.
bool refuses(int port) {
  try {
    HttpClient c(port);
    return false;
  } catch (const std::runtime_error&) {
    return true;
  }
}

}  // namespace

TEST_CASE("reload: collector.interval applies at once, history keeps every step within it",
          "[slow]") {
  // From 500 ms to 1 s (the same change as 1 s to 2 s, in half the time).
  Agent agent("", "commit_interval = \"1s\"\ninterval = \"500ms\"");
  HttpClient c(agent.port());
  const auto first = current(c);  // history is read from this sample on
  REQUIRE(eventually([&] { return sequence_of(c) >= first["sequence"].GetUint64() + 2; }));
  agent.write_config("", "commit_interval = \"1s\"\ninterval = \"1s\"");
  auto verdict = agent.reload();
  CHECK_THAT(verdict, Catch::Contains("collector.interval 500ms -> 1s"));
  CHECK(eventually([&] { return current(c)["interval_seconds"].GetDouble() == 1; }, 5s));
  const auto seq = sequence_of(c);
  REQUIRE(eventually([&] { return sequence_of(c) >= seq + 3; }, 15s));
  auto d = current(c);
  CHECK(d["timestamp"].GetDouble() == std::floor(d["timestamp"].GetDouble()));  // the new grid
  // Every tick from the first sample to this one is kept (counted by sequence).
  auto ts = history_timestamps(c, first["timestamp"].GetDouble(), d["timestamp"].GetDouble());
  INFO("timestamps: " << ts.size());
  REQUIRE(ts.size() >= 6);
  CHECK(ts.size() == d["sequence"].GetUint64() - first["sequence"].GetUint64() + 1);
  // No step is longer than the new interval, but for ticks missed on a busy machine (the agent
  // counts them: each one widens a step by an interval).
  const double missed = missed_ticks(c);
  INFO("missed ticks: " << missed);
  CHECK(largest_step(ts) <= 1.0 + missed);
  const double last_step = ts.back() - ts[ts.size() - 2];
  CHECK(last_step == std::floor(last_step));
  CHECK(last_step >= 1.0);
  CHECK(last_step <= 1.0 + missed);
  CHECK(agent.pid() > 0);
  CHECK(agent.stop(SIGTERM) == 0);
}

TEST_CASE("reload: an unchanged sensor keeps its instance and state, a changed one is recreated") {
  // slow_samples counts the samples one instance took: it goes on across a reload that keeps the
  // instance, and starts again at 1 in a new one.
  const std::string keep = slow_sensor("keep");
  Agent agent(keep + slow_sensor("change", "sleep_ms = 0") + slow_sensor("gone"));
  HttpClient c(agent.port());
  REQUIRE(eventually([&] { return metric_of(current(c), "change", "slow_samples") >= 3; }));
  const double kept_before = metric_of(current(c), "keep", "slow_samples");
  agent.write_config(keep + slow_sensor("change", "sleep_ms = 1") + slow_sensor("added") +
                     "[[sensor]]\nplugin = \"memory\"\n");
  auto verdict = agent.reload();
  CHECK_THAT(verdict, Catch::Contains("sensor change changed"));
  CHECK_THAT(verdict, Catch::Contains("sensor added added"));
  CHECK_THAT(verdict, Catch::Contains("sensor memory added"));
  CHECK_THAT(verdict, Catch::Contains("sensor gone removed"));
  CHECK_THAT(verdict, !Catch::Contains("sensor keep"));
  // The first snapshot after the reload: the kept instance counts on, the changed one restarts.
  REQUIRE(eventually([&] { return status_of(current(c), "memory") == "ok"; }, 5s));
  auto d = current(c);
  CHECK(metric_of(d, "keep", "slow_samples") > kept_before);
  CHECK(metric_of(d, "change", "slow_samples") <= 2);
  CHECK(metric_of(d, "added", "slow_samples") >= 1);
  CHECK(status_of(d, "gone") == "missing");
  // Snapshot order follows the new file; the agent's own report comes last.
  std::vector<std::string> names;
  for (auto& m : d["sensors"].GetObject()) names.push_back(m.name.GetString());
  CHECK(names == std::vector<std::string>{"keep", "change", "added", "memory", "agent", "alerts"});
  // /api/plugins: the new set, generation 2.
  auto p = parse_json(c.get("/api/plugins").body);
  CHECK(p["config"]["generation"].GetUint() == 2);
  CHECK(p["config"]["loaded_at"].GetDouble() > now_seconds() - 30);
  CHECK(p["reload"]["status"].GetString() == std::string("ok"));
  CHECK(p["plugins"][3]["name"].GetString() == std::string("memory"));
  CHECK(agent.stop(SIGTERM) == 0);
}

TEST_CASE("reload: a sensor's own interval and timeout change without a new instance") {
  Agent agent(slow_sensor("s"));
  HttpClient c(agent.port());
  REQUIRE(eventually([&] { return metric_of(current(c), "s", "slow_samples") >= 2; }));
  agent.write_config(slow_sensor("s", "", "interval = \"2s\"\ntimeout = \"1500ms\"\n"));
  const double before = metric_of(current(c), "s", "slow_samples");
  CHECK_THAT(agent.reload(), Catch::Contains("sensor s rescheduled"));
  // Read every other tick from now on: its timestamp lags the snapshot's by 1 s half the time.
  // The same instance counts on: never below the count before the reload (a new one starts at
  // 1), and higher once it is read again.
  bool lagged = false;
  double lowest = before, highest = before;
  eventually(
      [&] {
        auto d = current(c);
        const double n = metric_of(d, "s", "slow_samples");
        lowest = std::min(lowest, n);
        highest = std::max(highest, n);
        lagged |= d["timestamp"].GetDouble() - d["sensors"]["s"]["timestamp"].GetDouble() == 1.0;
        return lagged && highest > before;
      },
      8s);
  CHECK(lagged);
  CHECK(lowest >= before);
  CHECK(highest > before);
}

TEST_CASE("reload: routes are added, removed and changed while serving") {
  Agent agent;
  HttpClient c(agent.port());
  REQUIRE(c.get("/api/plugins").status == 200);
  agent.write_config(
      "[[route]]\npath = \"/\"\nhandler = \"dashboard\"\n"
      "[[route]]\npath = \"/api/current\"\nhandler = \"current\"\n"
      "[[route]]\npath = \"/api/health\"\nhandler = \"health\"\n"
      "[[route]]\npath = \"/healthz\"\nhandler = \"health\"\n"
      "[[route]]\npath = \"/metrics\"\nhandler = \"metrics\"\n");
  auto verdict = agent.reload();
  CHECK_THAT(verdict, Catch::Contains("route /healthz added"));
  CHECK_THAT(verdict, Catch::Contains("route /api/plugins removed"));
  CHECK_THAT(verdict, !Catch::Contains("route /api/current"));
  CHECK(c.get("/healthz").status == 200);
  CHECK(c.get("/api/plugins").status == 404);
  CHECK(c.get("/api/current").status == 200);
  // /metrics kept its request counter across the reload (a new router, the same counts).
  // (/metrics renders once per sample: the next one has generation 2.)
  CHECK(eventually(
      [&] {
        return c.get("/metrics").body.find("kiwi_config_generation 2\n") != std::string::npos;
      },
      3s));
  CHECK_THAT(c.get("/metrics").body,
             Catch::Contains("kiwi_http_requests_total{route=\"/api/current\",status=\"200\"}"));
}

TEST_CASE("reload: cors_origins, log_level, max_connections and keep_alive apply") {
  Agent agent;
  // At log_level info, SIGUSR1 is logged as ignored: the line looked for at warn below.
  const std::string usr1 = "info: received User defined signal 1, ignored";
  kill(agent.pid(), SIGUSR1);
  REQUIRE(eventually([&] { return count_of(agent.stderr_text(), usr1) == 1; }, 5s));
  HttpClient c(agent.port());
  const std::vector<std::pair<std::string, std::string>> origin = {
      {"Origin", "http://board.local"}};
  CHECK(c.get("/api/current", origin).header("access-control-allow-origin").empty());
  agent.write_config("", "",
                     "cors_origins = [\"http://board.local\"]\nmax_connections = 2\n"
                     "keep_alive = \"1s\"\n",
                     "log_level = \"warn\"\n");
  auto verdict = agent.reload();
  CHECK_THAT(verdict, Catch::Contains("http.cors_origins [] -> [http://board.local]"));
  CHECK_THAT(verdict, Catch::Contains("agent.log_level info -> warn"));
  HttpClient fresh(agent.port());
  CHECK(fresh.get("/api/current", origin).header("access-control-allow-origin") ==
        "http://board.local");
  // keep_alive 1s: an idle connection is closed within a few seconds.
  CHECK(eventually([&] { return fresh.closed_by_peer(); }, 5s));
  // max_connections 2: a third connection is served in place of the one idle the longest, which
  // the agent closes.
  HttpClient one(agent.port()), two(agent.port());
  CHECK(one.get("/api/health").status == 200);
  std::this_thread::sleep_for(150ms);
  CHECK(two.get("/api/health").status == 200);
  std::this_thread::sleep_for(150ms);
  HttpClient three(agent.port());
  CHECK(three.get("/api/health").status == 200);
  CHECK(eventually([&] { return one.closed_by_peer(); }, 2s));
  CHECK_FALSE(two.closed_by_peer());
  // log_level warn: an info line (SIGUSR1 is logged at info) no longer shows. The signal has been
  // handled once the agent took it (it left the pending set) and the loop that took it went round
  // to the next one: a reload sent after it has its verdict (a failed one, logged at error).
  kill(agent.pid(), SIGUSR1);
  REQUIRE(eventually([&] { return !signal_pending(agent.pid(), SIGUSR1); }, 5s));
  write_text(agent.config_path(), "[agent\n");  // not TOML: the reload fails, and says so
  CHECK_THAT(agent.reload(), Catch::Contains("error: reload failed"));
  CHECK(count_of(agent.stderr_text(), usr1) == 1);
}

TEST_CASE("reload: http.threads starts a new worker pool on the same port, answering throughout") {
  Agent agent("", "", "threads = 1\n");
  std::atomic<bool> done{false};
  std::atomic<int> failures{0}, answered{0};
  std::thread client([&] {
    while (!done) {
      try {
        HttpClient c(agent.port());
        if (c.get("/api/health").status == 200) ++answered;
      } catch (const std::exception&) {
        ++failures;
      }
    }
  });
  std::this_thread::sleep_for(200ms);
  agent.write_config("", "", "threads = 3\n");
  auto verdict = agent.reload();
  std::this_thread::sleep_for(300ms);
  done = true;
  client.join();
  CHECK_THAT(verdict, Catch::Contains("http.threads 1 -> 3"));
  CHECK(failures == 0);
  CHECK(answered > 0);
  auto count_mhd = [&] {
    int n = 0;
    for (auto& t : fs::directory_iterator("/proc/" + std::to_string(agent.pid()) + "/task"))
      n += read_text(t.path() / "comm").starts_with("MHD-");
    return n;
  };
  CHECK(eventually([&] { return count_mhd() == 3; }, 5s));
}

TEST_CASE("reload: http.bind moves the listener, the new port answers and the old one refuses") {
  Agent agent;
  const int old_port = agent.port();
  const int new_port = free_port();
  HttpClient kept(old_port);
  REQUIRE(kept.get("/api/current").status == 200);
  agent.write_config("", "", "bind = \"127.0.0.1:" + std::to_string(new_port) + "\"\n");
  const auto t0 = Clock::now();
  auto verdict = agent.reload();
  const auto took = Clock::now() - t0;
  INFO("reload with a bind move took "
       << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
  CHECK_THAT(verdict, Catch::Contains("http.bind 127.0.0.1:" + std::to_string(old_port) +
                                      " -> 127.0.0.1:" + std::to_string(new_port)));
  CHECK_THAT(verdict, Catch::Contains(
                          "now listening on http://127.0.0.1:" + std::to_string(new_port) + "/"));
  CHECK(HttpClient(new_port).get("/api/current").status == 200);
  CHECK(eventually([&] { return refuses(old_port); }, 5s));
}

TEST_CASE("reload: a failed reload changes nothing and is reported until one succeeds") {
  Agent agent("[[sensor]]\nplugin = \"memory\"\n");
  HttpClient c(agent.port());
  const auto good = agent.config_path().string();
  std::string expect;
  SECTION("a TOML error") {
    agent.write_config("[[sensor]]\nplugin = \"memory\"\n", "interval = \"fast\"");
    expect = good + ":9:12: collector.interval: \"fast\" is not a duration";
  }
  SECTION("a missing plugin") {
    agent.write_config("[[sensor]]\nplugin = \"gpu\"\n");
    expect = "kiwi-sensor-gpu.so: plugin file not found";
  }
  SECTION("an option the plugin refuses") {
    agent.write_config("[[sensor]]\nplugin = \"storage\"\n[sensor.options]\nbogus = 1\n");
    expect = "sensor.options.bogus: unknown option for plugin storage";
  }
  SECTION("a factory that refuses to start") {
    agent.write_config("[[sensor]]\nplugin = \"" KIWI_TEST_PLUGIN_DIR
                       "/test-throwing_factory.so\"\nname = \"t\"\n");
    expect = "refused to start";
  }
  SECTION("a port that cannot be bound") {
    Agent other;  // holds its port
    agent.write_config("[[sensor]]\nplugin = \"memory\"\n", "",
                       "bind = \"127.0.0.1:" + std::to_string(other.port()) + "\"\n");
    expect = "cannot listen on 127.0.0.1:" + std::to_string(other.port());
    auto verdict = agent.reload();
    CHECK_THAT(verdict, Catch::Contains(expect));
    CHECK(c.get("/api/current").status == 200);  // the old listener serves on
    agent.write_config("[[sensor]]\nplugin = \"memory\"\n");
    CHECK_THAT(agent.reload(), Catch::Contains("reloaded"));
    return;
  }
  SECTION("data_dir, procfs and sysfs need a restart") {
    auto key = GENERATE(as<std::string>{}, "data_dir", "procfs", "sysfs");
    const std::string lines = key == "data_dir" ? "" : key + " = \"/tmp\"\n";
    if (key == "data_dir") {
      // write_config() always writes data_dir first: point it elsewhere by hand.
      std::string text = read_text(agent.config_path());
      auto at = text.find("data_dir = \"") + 12;
      text.insert(at, "/tmp/elsewhere");
      text.erase(at + 14, text.find('"', at + 14) - (at + 14));
      write_text(agent.config_path(), text);
    } else {
      agent.write_config("[[sensor]]\nplugin = \"memory\"\n", "", "", lines);
    }
    expect = "agent." + key + ": changed from";
    auto verdict = agent.reload();
    CHECK_THAT(verdict, Catch::Contains(expect));
    CHECK_THAT(verdict, Catch::Contains("takes a restart"));
    return;
  }
  auto verdict = agent.reload();
  CHECK_THAT(verdict, Catch::StartsWith("error: reload failed, the running configuration stays"));
  CHECK_THAT(verdict, Catch::Contains(expect));
  // The old configuration serves on, and says the reload failed: health stays 200. The failed
  // reload is reported until one succeeds, so if it failed health, health would stay 503; what
  // else may fail it a moment on a busy machine (a sample late enough to be stale, a sensor past
  // its deadline) passes, and is waited out.
  HttpResponse h;
  CHECK(eventually([&] { return (h = c.get("/api/health")).status == 200; }, 10s));
  INFO(h.body);
  auto hd = parse_json(h.body);
  CHECK(hd["reload"]["status"].GetString() == std::string("failed"));
  CHECK_THAT(hd["reload"]["message"].GetString(), Catch::Contains(expect));
  CHECK(hd["reload"]["at"].GetDouble() > now_seconds() - 30);
  CHECK(hd["config"]["generation"].GetUint() == 1);
  CHECK(status_of(current(c), "memory") == "ok");
  auto p = parse_json(c.get("/api/plugins").body);
  CHECK(p["reload"]["status"].GetString() == std::string("failed"));
  // /metrics renders once per sample: the next one says so.
  auto metrics_say = [&](const std::string& line) {
    return eventually([&] { return c.get("/metrics").body.find(line) != std::string::npos; }, 3s);
  };
  CHECK(metrics_say("kiwi_config_last_reload_successful 0\n"));
  CHECK(metrics_say("kiwi_config_reloads_total{result=\"failed\"} 1\n"));
  // A later good reload clears it.
  agent.write_config("[[sensor]]\nplugin = \"memory\"\n");
  CHECK_THAT(agent.reload(), Catch::Contains("info: reloaded"));
  hd = parse_json(c.get("/api/health").body);
  CHECK(hd["reload"]["status"].GetString() == std::string("ok"));
  CHECK(hd["reload"]["message"].IsNull());
  CHECK(hd["config"]["generation"].GetUint() == 2);
  CHECK(metrics_say("kiwi_config_last_reload_successful 1\n"));
}

TEST_CASE("reload: a plugin file replaced on disk is loaded anew, an unchanged one is not") {
  TempDir plugins;
  const auto file = plugins.path / "kiwi-sensor-mine.so";
  fs::copy_file(kSlowPlugin, file);
  Agent agent(slow_sensor("mine", "", "", file.string()));
  HttpClient c(agent.port());
  REQUIRE(eventually([&] { return metric_of(current(c), "mine", "slow_samples") >= 3; }));
  CHECK_THAT(agent.reload(), Catch::Contains("no changes"));
  CHECK(metric_of(current(c), "mine", "slow_samples") >= 3);
  // Replaced as installers do: a new file renamed over the old one (a new inode).
  fs::copy_file(kSlowPlugin, plugins.path / "new.so");
  fs::rename(plugins.path / "new.so", file);
  CHECK_THAT(agent.reload(), Catch::Contains("sensor mine reloaded (its plugin file changed)"));
  CHECK(eventually([&] { return metric_of(current(c), "mine", "slow_samples") <= 2; }, 3s));
  CHECK(agent.stop(SIGTERM) == 0);
}

TEST_CASE("reload: queued samples survive a reload and the PID stays") {
  Agent agent("", "commit_interval = \"5m\"");
  HttpClient c(agent.port());
  REQUIRE(eventually([&] { return sequence_of(c) >= 2; }));
  const pid_t pid = agent.pid();
  agent.write_config("",
                     "commit_interval = \"4m\"\nretention = \"1h\"\n"
                     "minute_retention = \"2d\"\nhour_retention = \"60d\"");
  auto verdict = agent.reload();
  CHECK_THAT(verdict, Catch::Contains("collector.commit_interval 5m -> 4m"));
  CHECK_THAT(verdict, Catch::Contains("collector.retention 1d -> 1h"));
  CHECK_THAT(verdict, Catch::Contains("collector.minute_retention 30d -> 2d"));
  CHECK_THAT(verdict, Catch::Contains("collector.hour_retention 365d -> 60d"));
  CHECK(agent.pid() == pid);
  CHECK(waitpid(pid, nullptr, WNOHANG) == 0);
  CHECK(rows_on_disk(agent.db_path()) == 0);  // still queued
  const auto seq = sequence_of(c);
  REQUIRE(eventually([&] { return sequence_of(c) > seq; }));
  const auto last = sequence_of(c);
  CHECK(agent.stop(SIGTERM) == 0);
  CHECK(rows_on_disk(agent.db_path()) >= last);
}

TEST_CASE("deadline: a sensor that hangs is timed out, the others stay fresh, shutdown is prompt",
          "[slow]") {
  Agent agent("[[sensor]]\nplugin = \"memory\"\n" + slow_sensor("hang", "sleep_ms = -1") +
              slow_sensor("slow", "sleep_ms = 3000"));
  HttpClient c(agent.port());
  const auto seq = sequence_of(c);
  REQUIRE(eventually([&] { return sequence_of(c) >= seq + 4; }, 8s));
  auto d = current(c);
  CHECK(d["stale"].GetBool() == false);
  CHECK(status_of(d, "memory") == "ok");
  CHECK(status_of(d, "hang") == "error");
  CHECK_THAT(d["sensors"]["hang"]["message"].GetString(), Catch::StartsWith("timed out after 1s"));
  CHECK(status_of(d, "slow") == "error");
  CHECK_THAT(d["sensors"]["slow"]["message"].GetString(), Catch::StartsWith("timed out after 1s"));
  // The memory sensor is read every second.
  const double t = d["sensors"]["memory"]["timestamp"].GetDouble();
  CHECK(
      eventually([&] { return current(c)["sensors"]["memory"]["timestamp"].GetDouble() > t; }, 3s));
  auto h = c.get("/api/health");
  CHECK(h.status == 503);
  CHECK_THAT(h.body, Catch::Contains("sensor hang: timed out after 1s"));
  CHECK_THAT(h.body, !Catch::Contains("stale"));
  // The slow one returns now and then, and is called again: its samples go on.
  const auto log = agent.stderr_text();
  CHECK_THAT(log, Catch::Contains("sensor hang: timed out after 1s"));
  const auto t0 = Clock::now();
  CHECK(agent.stop(SIGTERM) == 0);
  CHECK(Clock::now() - t0 < 5s);
  CHECK_THAT(agent.stderr_text(), Catch::Contains("sensor hang abandoned"));
}

TEST_CASE("deadline: a sensor's timeout may exceed the interval, its reading lands late",
          "[slow]") {
  Agent agent(slow_sensor("slow", "sleep_ms = 1500", "timeout = \"4s\"\n") +
              "[[sensor]]\nplugin = \"memory\"\n");
  HttpClient c(agent.port());
  REQUIRE(eventually([&] { return metric_of(current(c), "slow", "slow_samples") >= 2; }, 10s));
  auto d = current(c);
  CHECK(status_of(d, "slow") == "ok");
  CHECK(d["stale"].GetBool() == false);
  CHECK(d["sensors"]["slow"]["duration_seconds"].GetDouble() >= 1.4);
}

TEST_CASE("deadline: a reload does not wait for a hung sensor, removed or kept") {
  const std::string hang = slow_sensor("hang", "sleep_ms = -1");
  Agent agent("[[sensor]]\nplugin = \"memory\"\n" + hang);
  HttpClient c(agent.port());
  REQUIRE(eventually([&] { return status_of(current(c), "hang") == "error"; }, 5s));
  agent.write_config("[[sensor]]\nplugin = \"memory\"\n" + hang, "stale_after = \"5s\"");
  const auto t0 = Clock::now();
  CHECK_THAT(agent.reload(), Catch::Contains("collector.stale_after 3s -> 5s"));
  agent.write_config("[[sensor]]\nplugin = \"memory\"\n");
  CHECK_THAT(agent.reload(), Catch::Contains("sensor hang removed"));
  CHECK(Clock::now() - t0 < 2s);
  CHECK(eventually([&] { return status_of(current(c), "hang") == "missing"; }, 3s));
  CHECK(agent.stop(SIGTERM) == 0);
}

TEST_CASE("start-up: HTTP answers within 1 s while the first sample is slow") {
  // Under an emulator the agent's start-up alone can take a second (emulator.hpp, slowdown): the
  // first answer is given that much longer, and the slow sample takes that much longer too, so the
  // answer still has to come well before it.
  const int k = slowdown();
  const auto t0 = Clock::now();
  Agent agent(slow_sensor("slow", "sleep_ms = " + std::to_string(3000 * k) + "\nfirst_only = true",
                          "timeout = \"" + std::to_string(5 * k) + "s\"\n"),
              "", "", "", "", false);
  const auto listening = Clock::now() - t0;
  HttpClient c(agent.port());
  auto r = c.get("/api/health");
  const auto answered = Clock::now() - t0;
  INFO(
      "listening after " << std::chrono::duration_cast<std::chrono::milliseconds>(listening).count()
                         << " ms, first answer after "
                         << std::chrono::duration_cast<std::chrono::milliseconds>(answered).count()
                         << " ms");
  CHECK(answered < scaled(1s));
  auto first = c.get("/api/current");
  if (first.status == 503) {
    CHECK_THAT(parse_json(first.body)["error"]["message"].GetString(),
               Catch::Contains("no sample yet"));
  }
  CHECK(c.get("/").status == 200);  // the page, which shows "loading" meanwhile
  // The first sample is published within half an interval, without the slow sensor, which is
  // still in progress; its reading follows once it returns.
  REQUIRE(eventually([&] { return c.get("/api/current").status == 200; }, scaled(3s)));
  auto d = current(c);
  CHECK(status_of(d, "slow") == "no_data");
  CHECK_THAT(d["sensors"]["slow"]["message"].GetString(),
             Catch::Contains("first sample in progress"));
  CHECK(eventually([&] { return status_of(current(c), "slow") == "ok"; }, scaled(6s)));
}

TEST_CASE(
    "start-up: /api/health and /api/current answer 503 with a reason before the first sample") {
  // The first tick waits up to half an interval for its sensors: with a 4 s interval, a sensor
  // slower than that leaves about 2 s in which there is no sample yet.
  Agent agent(slow_sensor("slow", "sleep_ms = 3000\nfirst_only = true"), "interval = \"4s\"", "",
              "", "", false);
  HttpClient c(agent.port());
  auto cur = c.get("/api/current");
  auto h = c.get("/api/health");
  if (cur.status == 200) skip_test("the first sample came before the first request");
  CHECK(cur.status == 503);
  CHECK(h.status == 503);
  CHECK_THAT(parse_json(h.body)["reasons"][0].GetString(), Catch::StartsWith("starting: "));
}

TEST_CASE("reload: a drop-in file in conf.d adds a sensor, as --check-config reads it") {
  Agent agent("", "", "", "", "include = [\"conf.d/*.toml\"]\n");
  HttpClient c(agent.port());
  const auto dropin = agent.config_path().parent_path() / "conf.d" / "50-slow.toml";
  fs::create_directories(dropin.parent_path());
  write_text(dropin, slow_sensor("extra"));
  auto check = run_agent_command({"--check-config", agent.config_path().string()});
  CHECK(check.exit_code == 0);
  CHECK_THAT(check.out, Catch::Contains("ok (14 sensors"));
  CHECK_THAT(agent.reload(), Catch::Contains("sensor extra added"));
  CHECK(eventually([&] { return status_of(current(c), "extra") == "ok"; }, 5s));
  CHECK(status_of(current(c), "cpu") == "ok");  // the thirteen defaults stay
  // A broken drop-in: the reload fails naming its file and line, nothing changes.
  write_text(dropin, "[http]\nthreads = 2\n");
  auto verdict = agent.reload();
  CHECK_THAT(verdict, Catch::Contains("reload failed"));
  CHECK_THAT(verdict,
             Catch::Contains(dropin.string() + ":1:2: http: an included file may hold only"));
  CHECK(status_of(current(c), "extra") == "ok");
}

TEST_CASE(
    "reload: a removed sensor's series are free, and labels change without a new "
    "instance") {
  const std::string unlabelled = "labels = {}\n";
  Agent agent(slow_sensor("s", "", unlabelled) + slow_sensor("t", "", unlabelled));
  HttpClient c(agent.port());
  // t's slow_samples is s's series (same name, no labels): refused while s owns it.
  REQUIRE(eventually([&] {
    auto d = current(c);
    return metric_of(d, "s", "slow_samples") >= 2 &&
           d["sensors"]["t"].HasMember("series_refused_total");
  }));
  CHECK(metric_of(current(c), "t", "slow_samples") == -1);
  agent.write_config(slow_sensor("t", "", unlabelled));
  CHECK_THAT(agent.reload(), Catch::Contains("sensor s removed"));
  REQUIRE(eventually([&] { return metric_of(current(c), "t", "slow_samples") >= 1; }, 5s));

  // Back with labels: a series of its own beside t's.
  agent.write_config(slow_sensor("t", "", unlabelled) +
                     slow_sensor("s", "", "labels = { room = \"lab\" }\n"));
  CHECK_THAT(agent.reload(), Catch::Contains("sensor s added"));
  auto room_of = [&](const rapidjson::Document& d) -> std::string {
    if (!d["sensors"].HasMember("s") || d["sensors"]["s"]["metrics"].Size() == 0) return "";
    const auto& m = d["sensors"]["s"]["metrics"][0];
    return m.HasMember("labels") ? m["labels"]["room"].GetString() : "";
  };
  REQUIRE(eventually([&] { return room_of(current(c)) == "lab"; }, 5s));
  CHECK_FALSE(current(c)["sensors"]["s"].HasMember("series_refused_total"));
  const double before = metric_of(current(c), "s", "slow_samples");
  agent.write_config(slow_sensor("t", "", unlabelled) +
                     slow_sensor("s", "", "labels = { room = \"attic\" }\n"));
  CHECK_THAT(agent.reload(), Catch::Contains("sensor s relabelled"));
  REQUIRE(eventually([&] { return room_of(current(c)) == "attic"; }, 5s));
  CHECK(metric_of(current(c), "s", "slow_samples") >= before);  // the same instance counts on
  CHECK_FALSE(current(c)["sensors"]["s"].HasMember("series_refused_total"));
  CHECK(agent.stop(SIGTERM) == 0);
}

TEST_CASE("kiwi-agent --reload signals the agent running on that config, found by its lock") {
  Agent agent(slow_sensor("s"));
  HttpClient c(agent.port());
  REQUIRE(eventually([&] { return metric_of(current(c), "s", "slow_samples") >= 1; }));
  agent.write_config(slow_sensor("s") + slow_sensor("t"));
  const std::size_t before = agent.stderr_text().size();
  auto r = run_agent_command({"--reload", "--config", agent.config_path().string()});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("sent SIGHUP to pid " + std::to_string(agent.pid())));
  CHECK(eventually([&] {
    return agent.stderr_text().substr(before).find("sensor t added") != std::string::npos;
  }));
  REQUIRE(eventually([&] { return metric_of(current(c), "t", "slow_samples") >= 1; }));
  CHECK(agent.stop(SIGTERM) == 0);
  // Nothing runs on it now: said, exit 1, and no signal to anyone.
  r = run_agent_command({"--reload", "--config", agent.config_path().string()});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("no kiwi-agent is running on " + agent.config_path().string()));
  // A config without a snapshot file has no lock to find the agent by.
  TempDir tmp;
  write_text(tmp.path / "k.toml", "[collector]\nsnapshot_path = \"\"\n");
  r = run_agent_command({"--reload", "--config", (tmp.path / "k.toml").string()});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("sets no collector.snapshot_path"));
}

TEST_CASE(
    "reload: alert rules apply, a rule that stays keeps its firing instance, a disabled one "
    "resolves") {
  const std::string rules =
      "[[sensor]]\nplugin = \"memory\"\n"
      "[[alert]]\nname = \"busy\"\nmetric = \"memory_used_ratio\"\nabove = 0.0\n"
      "[[alert]]\nname = \"roomy\"\nmetric = \"memory_total_bytes\"\nabove = 1.0\n";
  Agent agent(rules);
  HttpClient c(agent.port());
  auto firing = [&](const std::string& name) {
    return c.get("/metrics").body.find("kiwi_alert_firing{alertname=\"" + name + "\"") !=
           std::string::npos;
  };
  REQUIRE(eventually([&] { return firing("busy") && firing("roomy"); }, 5s));
  CHECK(count_of(agent.stderr_text(), "alert firing: busy") == 1);
  agent.write_config(rules + "[alerts]\ndisable = [\"roomy\"]\n");
  CHECK_THAT(agent.reload(), Catch::Contains("alert rules changed (11 rules, 1 disabled)"));
  CHECK(eventually([&] { return !firing("roomy"); }, 5s));
  CHECK(firing("busy"));
  CHECK(count_of(agent.stderr_text(), "alert firing: busy") == 1);  // kept, not fired again
  // A rule that does not load leaves the running ones as they are.
  agent.write_config(rules + "[[alert]]\nname = \"bad\"\nmetric = \"x\"\nabove = 1\nbelow = 2\n");
  CHECK_THAT(agent.reload(), Catch::Contains("error: reload failed") &&
                                 Catch::Contains("alert.below: give above or below, not both"));
  CHECK(firing("busy"));
}
