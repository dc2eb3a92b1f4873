// The real kiwi-agent binary on a loopback port with a real SQLite file.
#include <rapidjson/document.h>
#include <sched.h>
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <cmath>

#include "checks.hpp"

using namespace kiwi_test;
using namespace std::chrono_literals;

namespace {

// Asserts a 400 in the API's error shape naming `parameter`, on a connection that stays usable.
void expect_bad_parameter(HttpClient& c, const std::string& target, const std::string& parameter) {
  INFO(target);
  auto r = c.get(target);
  CHECK(r.status == 400);
  CHECK(r.header("content-type") == "application/json");
  auto d = parse_json(r.body);
  REQUIRE(d.HasMember("error"));
  CHECK(d["error"]["parameter"].GetString() == parameter);
  CHECK(std::string(d["error"]["message"].GetString()).size() > 5);
}

}  // namespace

TEST_CASE("agent serves the dashboard, the snapshot and the history") {
  Agent agent;
  HttpClient c(agent.port());

  SECTION("/ is the dashboard and its assets come from the agent") {
    auto r = c.get("/");
    CHECK(r.status == 200);
    CHECK(r.header("content-type") == "text/html; charset=utf-8");
    CHECK_THAT(r.body, Catch::Contains("<html") && Catch::Contains("src=\"assets/app.js\""));
    CHECK_THAT(r.body, !Catch::Contains("http://") && !Catch::Contains("https://"));
    // relative URLs only: the page also works under another agent's /peer/<name>/
    CHECK_THAT(r.body, !Catch::Contains("=\"/"));
    auto fleet = c.get("/fleet");  // the fleet page, on the default routes too
    CHECK(fleet.status == 200);
    CHECK_THAT(fleet.body, Catch::Contains("src=\"assets/fleet.js\"") && !Catch::Contains("=\"/"));
    auto js = c.get("/assets/app.js");
    CHECK(js.status == 200);
    CHECK(js.header("content-type") == "text/javascript; charset=utf-8");
    auto again = c.get("/", {{"If-None-Match", r.header("etag")}});
    CHECK(again.status == 304);
    CHECK(c.get("/assets/nope.js").status == 404);
  }

  SECTION("/api/current has all four sensors and a fresh timestamp") {
    auto r = c.get("/api/current");
    REQUIRE(r.status == 200);
    CHECK(r.header("content-type") == "application/json");
    auto d = parse_json(r.body);
    CHECK(d["version"].GetInt() == 1);
    CHECK(std::fabs(d["timestamp"].GetDouble() - now_seconds()) < 2.0);
    CHECK(d["interval_seconds"].GetDouble() == 1.0);
    CHECK(d["stale"].GetBool() == false);
    CHECK(std::string(d["host"].GetString()).size() > 0);
    for (auto name : {"cpu", "thermal", "memory", "storage"}) {
      INFO(name);
      REQUIRE(d["sensors"].HasMember(name));
      std::string status = d["sensors"][name]["status"].GetString();
      CHECK((status == "ok" || status == "no_data"));
      CHECK(d["sensors"][name]["metrics"].IsArray());
    }
    // Metrics in base units, as DESIGN.md names them.
    bool total = false;
    for (auto& m : d["sensors"]["memory"]["metrics"].GetArray())
      if (std::string(m["name"].GetString()) == "memory_total_bytes") {
        total = true;
        CHECK(m["unit"].GetString() == std::string("bytes"));
        CHECK(m["value"].GetDouble() > 1e6);
      }
    CHECK(total);
    // ETag is the sample sequence; If-None-Match gives 304 with no body.
    auto etag = r.header("etag");
    CHECK(etag == "\"" + std::to_string(d["sequence"].GetUint64()) + "\"");
    auto same = c.get("/api/current", {{"If-None-Match", etag}});
    if (same.header("etag") == etag) {  // unless a new sample landed in between
      CHECK(same.status == 304);
      CHECK(same.body.empty());
    }
  }

  SECTION("HEAD answers with the GET headers and no body") {
    auto get = c.get("/api/history?limit=1");
    auto head = c.request("HEAD", "/api/history?limit=1");
    CHECK(head.status == 200);
    CHECK(head.header("content-type") == "application/json");
    CHECK(head.body.empty());
    CHECK(c.get("/api/current").status == 200);  // still in step on the same connection
  }

  SECTION("the snapshot file is the same JSON, replaced atomically") {
    auto file = agent.dir() / "run/current.json";
    REQUIRE(eventually([&] { return fs::exists(file); }));
    auto d = parse_json(read_text(file));
    CHECK(d["sensors"].HasMember("memory"));
    CHECK_FALSE(fs::exists(agent.dir() / "run/current.json.tmp"));
  }
}

TEST_CASE("agent: /api/history?limit=5 after six ticks has 5 samples about 1 s apart, oldest first",
          "[slow]") {
  Agent agent;
  HttpClient c(agent.port());
  REQUIRE(eventually([&] { return sequence_of(c) >= 7; }, 15s));
  auto r = c.get("/api/history?limit=5&series=*");
  REQUIRE(r.status == 200);
  auto d = parse_json(r.body);
  CHECK(d["count"].GetInt() == 5);
  auto& ts = d["timestamps"];
  REQUIRE(ts.Size() == 5);
  for (rapidjson::SizeType i = 1; i < ts.Size(); ++i)
    CHECK(ts[i].GetDouble() - ts[i - 1].GetDouble() == Approx(1.0).margin(0.3));
  CHECK(std::fabs(ts[4].GetDouble() - now_seconds()) < 2.5);
  // One array per series, with its unit, as long as the timestamps.
  REQUIRE(d["series"].HasMember("memory_total_bytes"));
  auto& mem = d["series"]["memory_total_bytes"];
  CHECK(mem["unit"].GetString() == std::string("bytes"));
  CHECK(mem["values"].Size() == 5);
  REQUIRE(d["series"].HasMember("cpu_core_usage_ratio{core=\"0\"}"));
  CHECK(d["series"]["cpu_core_usage_ratio{core=\"0\"}"]["labels"]["core"].GetString() ==
        std::string("0"));
  // Default limit is 120: all we have so far; default series are the headline ones.
  auto all = parse_json(c.get("/api/history").body);
  CHECK(all["count"].GetInt() >= 7);
  CHECK(all["series"].HasMember("cpu_usage_ratio"));
  CHECK(all["series"].HasMember("memory_used_bytes"));
  CHECK_FALSE(all["series"].HasMember("memory_total_bytes"));
}

TEST_CASE("agent: bad requests get JSON errors and the connection stays usable") {
  Agent agent;
  HttpClient c(agent.port());
  expect_bad_parameter(c, "/api/history?limit=abc", "limit");
  expect_bad_parameter(c, "/api/history?limit=0", "limit");
  expect_bad_parameter(c, "/api/history?limit=86401", "limit");
  expect_bad_parameter(c, "/api/history?limit=99999999999999999999999", "limit");
  expect_bad_parameter(c, "/api/history?limit=-1", "limit");
  expect_bad_parameter(c, "/api/history?limit=1.5", "limit");
  expect_bad_parameter(c, "/api/history?limit=", "limit");
  expect_bad_parameter(c, "/api/history?limit", "limit");
  expect_bad_parameter(c, "/api/history?limit=5&limit=6", "limit");
  expect_bad_parameter(c, "/api/history?limt=5", "limt");
  CHECK(c.get("/api/history?limit=86400").status == 200);

  auto missing = c.get("/no/such/path");
  CHECK(missing.status == 404);
  CHECK(parse_json(missing.body)["error"]["status"].GetInt() == 404);

  auto post = c.request("POST", "/api/current", {}, "x=1");
  CHECK(post.status == 405);
  CHECK(post.header("allow") == "GET, HEAD");
  CHECK(parse_json(post.body)["error"]["status"].GetInt() == 405);
  auto del = c.request("DELETE", "/api/history");
  CHECK(del.status == 405);

  auto ok = c.get("/api/current");  // same connection, after every error above
  CHECK(ok.status == 200);
  CHECK_FALSE(c.closed_by_peer());
}

TEST_CASE("agent: SIGTERM and SIGINT stop it cleanly with exit 0 and an intact database") {
  for (int sig : {SIGTERM, SIGINT}) {
    Agent agent;
    HttpClient c(agent.port());
    REQUIRE(eventually([&] { return sequence_of(c) >= 2; }));
    // Bodies compressed on demand by the handlers' calls (the snapshot's among them, which the
    // agent holds until after the plugins are unloaded) must not outlive plugin code.
    for (const char* target : {"/", "/api/current", "/api/history", "/metrics"})
      CHECK(c.get(target, {{"Accept-Encoding", "gzip"}}).header("content-encoding") == "gzip");
    CHECK(agent.stop(sig) == 0);
    CHECK(quick_check(agent.db_path()) == "ok");
    CHECK_THAT(agent.stderr_text(), Catch::Contains("stopping"));
  }
}

TEST_CASE("agent: a sensor that throws is reported as error and the agent keeps its 1 Hz") {
  Agent agent(R"(
[[sensor]]
plugin = "memory"
[[sensor]]
plugin = ")" KIWI_TEST_PLUGIN_DIR R"(/test-throwing_sensor.so"
name = "flaky"
)");
  HttpClient c(agent.port());
  std::uint64_t first = sequence_of(c);
  REQUIRE(eventually([&] { return sequence_of(c) >= first + 2; }, 5s));
  auto d = parse_json(c.get("/api/current").body);
  CHECK(d["sensors"]["flaky"]["status"].GetString() == std::string("error"));
  CHECK_THAT(d["sensors"]["flaky"]["message"].GetString(), Catch::Contains("Input/output error"));
  CHECK(d["sensors"]["memory"]["status"].GetString() == std::string("ok"));
}

TEST_CASE("agent: /api/current says stale once the snapshot is older than stale_after") {
  // A collector that stops ticking (here: its thread stopped, as a stuck disk would stop it);
  // HTTP keeps answering and must say so. (A slow sensor no longer stalls it: deadlines.)
  Agent agent("", "stale_after = \"1s\"");
  HttpClient c(agent.port());
  FrozenThread frozen(agent.pid(), "kiwi-collector");
  bool saw_stale = eventually(
      [&] {
        auto r = c.get("/api/current");
        auto d = parse_json(r.body);
        return d["stale"].GetBool() && r.header("etag").ends_with("s\"");
      },
      10s);
  CHECK(saw_stale);
}

TEST_CASE("kiwi-agent --check-config") {
  TempDir tmp;
  SECTION("a good file: exit 0") {
    write_text(tmp.path / "ok.toml", "[agent]\nplugin_dir = \"" KIWI_PLUGIN_DIR "\"\n");
    auto r = run_agent_command({"--check-config", (tmp.path / "ok.toml").string()});
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("ok (13 sensors, 11 routes"));
  }
  SECTION("a broken file: exit 2 and file:line:col") {
    auto file = (tmp.path / "bad.toml").string();
    write_text(file, "[collector]\ninterval = \"fast\"\n");
    auto r = run_agent_command({"--check-config", file});
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err,
               Catch::Contains(file + ":2:12: collector.interval: \"fast\" is not a duration"));
  }
  SECTION("a missing plugin: exit 2 naming the file") {
    auto file = (tmp.path / "missing.toml").string();
    write_text(file,
               "[agent]\nplugin_dir = \"" KIWI_PLUGIN_DIR "\"\n[[sensor]]\nplugin = \"gpu\"\n");
    auto r = run_agent_command({"--check-config", file});
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(file + ":4:10: " KIWI_PLUGIN_DIR
                                             "/kiwi-sensor-gpu.so: plugin file not found"));
  }
  SECTION("a plugin with the wrong ABI version: exit 2 naming the file and both versions") {
    auto file = (tmp.path / "abi.toml").string();
    write_text(file, "[[sensor]]\nplugin = \"" KIWI_TEST_PLUGIN_DIR
                     "/test-wrong_abi.so\"\nname = \"x\"\n");
    auto r = run_agent_command({"--check-config", file});
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err,
               Catch::Contains("test-wrong_abi.so: plugin built for ABI " +
                               std::to_string(KIWI_ABI_MAJOR + 1) + ".0; this agent loads ABI " +
                               std::to_string(KIWI_ABI_MAJOR) + ".x"));
  }
  SECTION("an unknown plugin option: exit 2 at the option's line") {
    auto file = (tmp.path / "opt.toml").string();
    write_text(file, "[agent]\nplugin_dir = \"" KIWI_PLUGIN_DIR
                     "\"\n[[route]]\npath = \"/\"\nhandler = "
                     "\"current\"\n[route.options]\ncolour = \"red\"\n");
    auto r = run_agent_command({"--check-config", file});
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(file + ":7:1: route.options.colour: unknown option for "
                                             "plugin current; it takes no options"));
  }
}

TEST_CASE("kiwi-agent refuses to start on a bad plugin, with exit 2") {
  TempDir tmp;
  for (auto plugin : {"test-wrong_abi.so", "test-not_kiwi.so", "test-throwing_factory.so"}) {
    INFO(plugin);
    auto file = (tmp.path / "kiwi.toml").string();
    write_text(
        file, "[agent]\ndata_dir = \"" + (tmp.path / "data").string() +
                  "\"\n[http]\nbind = \"127.0.0.1:0\"\n[[sensor]]\nplugin = \"" KIWI_TEST_PLUGIN_DIR
                  "/" +
                  plugin + "\"\nname = \"bad\"\n");
    auto r = run_agent_command({"--config", file});
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(plugin));
    CHECK_THAT(r.err, !Catch::Contains("listening"));
  }
}

TEST_CASE("kiwi-agent --print-config prints the merged configuration, which loads as the same") {
  TempDir tmp;
  fs::create_directories(tmp.path / "conf.d");
  auto file = (tmp.path / "kiwi.toml").string();
  write_text(
      file, "[agent]\nplugin_dir = \"" KIWI_PLUGIN_DIR
            "\"\ninclude = [\"conf.d/*.toml\"]\n[collector]\ninterval = \"2s\"\n"
            "[[sensor]]\nplugin = \"exec\"\nname = \"ups\"\nlabels = { room = \"lab \\\"1\\\"\" }\n"
            "[sensor.options]\ncommand = [\"/bin/echo\", \"ups_load 1\"]\n");
  write_text(tmp.path / "conf.d/mem.toml", "[[sensor]]\nplugin = \"memory\"\nname = \"mem2\"\n");
  auto r = run_agent_command({"--print-config", "--config", file});
  CHECK(r.exit_code == 0);
  // Defaults included, the drop-in's entry merged, include emptied (its entries are here).
  CHECK_THAT(r.out, Catch::Contains("\n[collector]\ninterval = \"2s\"\nretention = \"1d\"\n"));
  CHECK_THAT(r.out, Catch::Contains("\nbind = \"127.0.0.1:8095\"\n"));
  CHECK_THAT(r.out, Catch::Contains("\ninclude = []\n"));
  CHECK_THAT(r.out, Catch::Contains("[[sensor]]\nplugin = \"memory\"\nname = \"mem2\"\n"));
  CHECK_THAT(r.out, Catch::Contains("labels = { \"room\" = \"lab \\\"1\\\"\" }\n"));
  CHECK_THAT(r.out, Catch::Contains("options = { command = [ '/bin/echo', 'ups_load 1' ] }"));
  // Loaded again: the same configuration, and it checks clean.
  write_text(tmp.path / "printed.toml", r.out);
  auto again =
      run_agent_command({"--print-config", "--config", (tmp.path / "printed.toml").string()});
  CHECK(again.exit_code == 0);
  auto body = [](const std::string& s) { return s.substr(s.find("\n[agent]")); };
  CHECK(body(again.out) == body(r.out));
  auto check = run_agent_command({"--check-config", (tmp.path / "printed.toml").string()});
  CHECK(check.exit_code == 0);
  CHECK_THAT(check.out, Catch::Contains("ok (2 sensors, 11 routes"));
}

TEST_CASE("kiwi-agent --list-plugins lists every plugin with its kind, and names a broken one") {
  TempDir tmp;
  auto file = (tmp.path / "kiwi.toml").string();
  write_text(file, "[agent]\nplugin_dir = \"" KIWI_PLUGIN_DIR "\"\n");
  auto r = run_agent_command({"--list-plugins", "--config", file});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("sensor   cpu            CPU usage"));
  CHECK_THAT(r.out, Catch::Contains("handler  metrics        Prometheus text exposition"));
  CHECK_THAT(r.out, Catch::Contains("output   remote_write"));
  CHECK_THAT(r.out, Catch::Contains("/kiwi-sensor-exec.so)\n"));
  // A directory of its own with one good plugin and one that is not a kiwi plugin.
  fs::create_directories(tmp.path / "plugins");
  fs::copy_file(KIWI_PLUGIN_DIR "/kiwi-sensor-cpu.so", tmp.path / "plugins/kiwi-sensor-cpu.so");
  fs::copy_file(KIWI_TEST_PLUGIN_DIR "/test-not_kiwi.so", tmp.path / "plugins/kiwi-sensor-x.so");
  write_text(file, "[agent]\nplugin_dir = \"" + (tmp.path / "plugins").string() + "\"\n");
  r = run_agent_command({"--list-plugins", "--config", file});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.out, Catch::Contains("sensor   cpu ") &&
                        Catch::Contains("broken   " + (tmp.path / "plugins").string() +
                                        "/kiwi-sensor-x.so: "));
  // The built-in directory comes after: its cpu is shadowed by the one above.
  CHECK_THAT(r.out, Catch::Contains("kiwi-sensor-cpu.so: not used, " +
                                    (tmp.path / "plugins").string() + " has one)"));
}

TEST_CASE("kiwi-agent --once samples every sensor as the agent would and prints /api/current") {
  TempDir tmp;
  auto file = (tmp.path / "kiwi.toml").string();
  const std::string board = KIWI_FIXTURES_DIR "/rpi4";
  write_text(file, "[agent]\nplugin_dir = \"" KIWI_PLUGIN_DIR "\"\nprocfs = \"" + board +
                       "/proc\"\nsysfs = \"" + board + "/sys\"\n[[sensor]]\nplugin = \"cpu\"\n" +
                       "[[sensor]]\nplugin = \"memory\"\nlabels = { room = \"lab\" }\n");
  auto r = run_agent_command({"--once", "--config", file});
  CHECK(r.exit_code == 0);
  auto d = parse_json(r.out);
  REQUIRE(d.HasMember("sensors"));
  CHECK(d["sensors"]["cpu"]["status"].GetString() == std::string("ok"));
  CHECK(d["sensors"]["memory"]["status"].GetString() == std::string("ok"));
  CHECK(d["sensors"]["memory"]["metrics"][0]["labels"]["room"].GetString() == std::string("lab"));
  CHECK_FALSE(d["sensors"].HasMember("agent"));
  // No database, no port: nothing but the output.
  CHECK_FALSE(fs::exists(tmp.path / "data"));
  CHECK_THAT(r.err, !Catch::Contains("listening"));
  // A sensor that fails: it says why, and the exit code is 1.
  write_text(file, "[agent]\nplugin_dir = \"" KIWI_PLUGIN_DIR
                   "\"\n[[sensor]]\nplugin = \"exec\"\nname = \"bad\"\noptions = { command = "
                   "[\"/bin/false\"] }\n");
  r = run_agent_command({"--once", "--config", file});
  CHECK(r.exit_code == 1);
  d = parse_json(r.out);
  CHECK(d["sensors"]["bad"]["status"].GetString() == std::string("error"));
  CHECK(d["sensors"]["bad"]["message"].GetString() == std::string("exited with status 1"));
}

TEST_CASE("kiwi-agent --print-default-config prints config/kiwi-agent.toml, which checks clean") {
  auto r = run_agent_command({"--print-default-config"});
  CHECK(r.exit_code == 0);
  // config/kiwi-agent.toml with the install layout's plugin_dir filled in, and nothing else changed
  CHECK(r.out == read_text(KIWI_DEFAULT_CONFIG));
  std::string source = read_text(KIWI_SOURCE_DIR "/config/kiwi-agent.toml");
  const std::string placeholder = "@KIWI_PLUGIN_DIR_FROM_BINDIR@";
  REQUIRE(source.find(placeholder) != std::string::npos);
  source.replace(source.find(placeholder), placeholder.size(), KIWI_PLUGIN_DIR_FROM_BINDIR);
  CHECK(r.out == source);
  auto bad = run_agent_command({"--bogus"});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("unknown argument '--bogus'") && Catch::Contains("usage:"));
}

TEST_CASE("agent: kill -9 loses at most the last commit interval and never corrupts the database") {
  Agent agent("", "commit_interval = \"1s\"");
  HttpClient c(agent.port());
  REQUIRE(eventually([&] { return sequence_of(c) >= 5; }, 15s));
  auto seq = sequence_of(c);
  CHECK(agent.stop(SIGKILL) == 128 + SIGKILL);
  CHECK(quick_check(agent.db_path()) == "ok");
  auto rows = rows_on_disk(agent.db_path());
  CHECK(rows + 2 >= seq);  // at most a second of samples (plus the one in flight) lost
  CHECK(rows <= seq);
}

TEST_CASE("agent: SIGTERM writes every queued sample before exiting") {
  Agent agent("", "commit_interval = \"5m\"");
  HttpClient c(agent.port());
  REQUIRE(eventually([&] { return sequence_of(c) >= 3; }));
  CHECK(rows_on_disk(agent.db_path()) == 0);  // nothing committed yet: all queued
  auto seq = sequence_of(c);
  CHECK(agent.stop(SIGTERM) == 0);
  CHECK(rows_on_disk(agent.db_path()) >= seq);
}

TEST_CASE("agent: kiwi_agent_disk_written_bytes_total is write_bytes of its own /proc/PID/io") {
  // The agent reads <agent.procfs>/self/io (here the real /proc): its own process's counter. A
  // kernel without CONFIG_TASK_IO_ACCOUNTING has no such file, and the series is absent.
  if (!fs::exists("/proc/self/io")) skip_test("this kernel has no /proc/self/io");
  Agent agent("", "commit_interval = \"1s\"");
  HttpClient c(agent.port());
  const std::string io_path = "/proc/" + std::to_string(agent.pid()) + "/io";
  auto write_bytes = [&] {
    const std::string io = read_text(io_path);
    const auto at = io.find("\nwrite_bytes: ");
    REQUIRE(at != std::string::npos);
    return std::stod(io.substr(at + 14));
  };
  auto reported = [&] {
    const std::string m = c.get("/metrics").body;
    const std::string name = "\nkiwi_agent_disk_written_bytes_total ";
    const auto at = m.find(name);
    REQUIRE(at != std::string::npos);
    return std::stod(m.substr(at + name.size()));
  };
  REQUIRE(eventually([&] { return sequence_of(c) >= 3; }));
  // A sample taken before the kernel's figure is read shows at most that figure; a sample taken
  // after it at least that (on a disk the agent's commits raise it; on tmpfs both stay 0).
  const double first = reported();
  const double kernel = write_bytes();
  CHECK(first <= kernel);
  const auto seq = sequence_of(c);
  REQUIRE(eventually([&] { return sequence_of(c) >= seq + 2; }));
  CHECK(reported() >= kernel);
}

TEST_CASE("agent: a full disk makes health fail with the reason, serving and sampling go on",
          "[slow]") {
  TempDir tmp;
  TinyFilesystem tiny(tmp.path / "tiny", "96k");
  if (!tiny.mounted()) skip_test("cannot mount a tmpfs here (needs root); full-disk test not run");
  Agent agent("", "commit_interval = \"200ms\"\ninterval = \"200ms\"", "", tiny.path().string());
  HttpClient c(agent.port());
  bool failing = eventually(
      [&] {
        auto r = c.get("/api/health");
        return r.status == 503 && r.body.find("store: the last") != std::string::npos &&
               r.body.find("full") != std::string::npos;
      },
      60s);
  CHECK(failing);
  auto seq = sequence_of(c);
  REQUIRE(eventually([&] { return sequence_of(c) > seq + 2; }));  // still sampling
  auto h = c.get("/api/history?limit=3");
  CHECK(h.status == 200);  // queued samples are still served
  CHECK_THAT(agent.stderr_text(), Catch::Contains("history store:") && Catch::Contains("full"));
  // Room again: the queued samples are written and health recovers.
  REQUIRE(tiny.grow("8m"));
  CHECK(eventually([&] { return c.get("/api/health").status == 200; }, 10s));
  CHECK(agent.stop() == 0);
}

TEST_CASE("agent: a port already in use stops start-up with exit 1 and the address") {
  Agent first;
  TempDir tmp;
  auto file = (tmp.path / "kiwi.toml").string();
  write_text(file, "[agent]\ndata_dir = \"" + (tmp.path / "data").string() +
                       "\"\nplugin_dir = \"" KIWI_PLUGIN_DIR "\"\n[http]\nbind = \"127.0.0.1:" +
                       std::to_string(first.port()) + "\"\n[collector]\nsnapshot_path = \"\"\n");
  auto r = run_agent_command({"--config", file});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("cannot listen on 127.0.0.1:" + std::to_string(first.port())));
}

namespace {
// Threads of `pid` whose name starts with "MHD-" (libmicrohttpd names its workers).
int mhd_threads(pid_t pid) {
  int n = 0;
  for (auto& t : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task"))
    n += read_text(t.path() / "comm").starts_with("MHD-");
  return n;
}
}  // namespace

TEST_CASE("agent: threads = \"auto\" runs one worker per CPU it may use, a number is taken as is") {
  cpu_set_t saved;
  REQUIRE(sched_getaffinity(0, sizeof saved, &saved) == 0);
  int first_cpu = 0;
  while (!CPU_ISSET(first_cpu, &saved)) ++first_cpu;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first_cpu, &one);
  REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);  // the agent inherits this thread's mask
  std::optional<Agent> pinned;
  try {
    pinned.emplace();
  } catch (...) {
    sched_setaffinity(0, sizeof saved, &saved);
    throw;
  }
  REQUIRE(sched_setaffinity(0, sizeof saved, &saved) == 0);
  CHECK_THAT(pinned->stderr_text(), Catch::Contains(", 1 worker thread (auto), "));
  // Each worker names itself once it runs, which may be a moment after "listening".
  CHECK(eventually([&] { return mhd_threads(pinned->pid()) == 1; }, 5s));
  CHECK(HttpClient(pinned->port()).get("/api/current").status == 200);

  Agent three("", "", "threads = 3\n");
  CHECK_THAT(three.stderr_text(), Catch::Contains(", 3 worker threads, "));
  CHECK(eventually([&] { return mhd_threads(three.pid()) == 3; }, 5s));
  CHECK(HttpClient(three.port()).get("/api/current").status == 200);
}

TEST_CASE(
    "agent: runs with a one-chunk malloc cache unless GLIBC_TUNABLES already sets one, under its "
    "own name") {
  // The agent executes itself again with glibc.malloc.tcache_count=1 (see main.cpp), marked by
  // KIWI_AGENT_TUNED=1; the environment of the running process shows what it runs with. (glibc's
  // loader cuts the text it shows after the first tunable, so with two only the user's is seen.)
  if (!emulator().empty())
    skip_test(
        "under an emulator the agent cannot execute itself again: the kernel refuses its "
        "foreign binary (ENOEXEC) and the agent runs on with glibc's default malloc cache");
  auto env_of = [](pid_t pid, const std::string& name) {
    std::string env = read_text("/proc/" + std::to_string(pid) + "/environ");
    for (std::size_t at = 0; at < env.size();) {
      std::size_t end = env.find('\0', at);
      std::string var = env.substr(at, end - at);
      if (var.rfind(name + "=", 0) == 0) return var.substr(name.size() + 1);
      at = end == std::string::npos ? env.size() : end + 1;
    }
    return std::string("<unset>");
  };
  const char* saved = std::getenv("GLIBC_TUNABLES");
  const std::string restore = saved ? saved : "";
  struct Case {
    const char* given;
    std::string shown;
    bool re_executed;
  };
  const Case cases[] = {
      {nullptr, "glibc.malloc.tcache_count=1", true},
      {"glibc.malloc.arena_max=2", "glibc.malloc.arena_max=2", true},
      {"glibc.malloc.tcache_count=7", "glibc.malloc.tcache_count=7", false}};  // the user's wins
  for (auto& c : cases) {
    INFO((c.given ? c.given : "unset"));
    if (c.given)
      setenv("GLIBC_TUNABLES", c.given, 1);
    else
      unsetenv("GLIBC_TUNABLES");
    Agent agent;
    CHECK(env_of(agent.pid(), "GLIBC_TUNABLES") == c.shown);
    CHECK(env_of(agent.pid(), "KIWI_AGENT_TUNED") == (c.re_executed ? "1" : "<unset>"));
    // Its name in ps, top, ss and dmesg is still the binary's after executing itself again (it
    // was "exe", from /proc/self/exe), and so is its command line.
    CHECK(read_text("/proc/" + std::to_string(agent.pid()) + "/comm") == "kiwi-agent\n");
    CHECK_THAT(read_text("/proc/" + std::to_string(agent.pid()) + "/cmdline"),
               Catch::StartsWith(std::string(KIWI_AGENT_BIN) + '\0'));
    HttpClient client(agent.port());
    CHECK(client.get("/api/health").status == 200);
  }
  if (saved)
    setenv("GLIBC_TUNABLES", restore.c_str(), 1);
  else
    unsetenv("GLIBC_TUNABLES");
}
