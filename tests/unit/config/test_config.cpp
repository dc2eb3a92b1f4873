#include <catch2/catch.hpp>
#include <fstream>

#include "config/config.hpp"
#include "config/schema.hpp"
#include "config/toml_table.hpp"
#include "test_support.hpp"

using namespace kiwi::agent;

namespace {
Config load(const std::string& text) {
  return load_config_text(text, "kiwi.toml", "/opt/kiwi/bin");
}

// The error message for `text`, or "" if it loads.
std::string error_of(const std::string& text) {
  try {
    load(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("config: an empty file gives the documented defaults") {
  Config c = load("");
  CHECK(c.http.bind.str() == "127.0.0.1:8095");
  CHECK(c.http.threads == 0);  // "auto"
  CHECK(c.http.keep_alive == Millis(5000));
  CHECK(c.http.max_connections == 256);
  CHECK(c.collector.interval == Millis(1000));
  CHECK(c.collector.retention == Millis(86'400'000));
  CHECK(c.collector.stale_after == Millis(3000));  // 3 x interval
  CHECK(c.collector.commit_interval == Millis(300'000));
  CHECK(c.collector.minute_retention == Millis(30 * 86'400'000LL));
  CHECK(c.collector.hour_retention == Millis(365 * 86'400'000LL));
  CHECK(c.collector.snapshot_path == "/run/kiwi-agent/current.json");
  CHECK(c.agent.procfs == "/proc");
  CHECK(c.agent.sysfs == "/sys");
  CHECK(c.agent.log_level == kiwi::LogLevel::info);
  // $ORIGIN = the executable's directory; the rest is the install layout's (CMakeLists.txt)
  CHECK(c.agent.plugin_dir == "/opt/kiwi/bin/" KIWI_PLUGIN_DIR_FROM_BINDIR);
  REQUIRE(c.sensors.size() == 13);
  CHECK(c.sensors[0].plugin == "cpu");
  CHECK(c.sensors[3].name == "storage");
  CHECK(c.sensors[4].name == "network");
  CHECK(c.sensors[5].name == "diskio");
  CHECK(c.sensors[6].name == "pressure");
  CHECK(c.sensors[7].name == "devfreq");
  CHECK(c.sensors[8].name == "power");
  CHECK(c.sensors[9].name == "cpufreq");
  CHECK(c.sensors[10].name == "hwmon");
  CHECK(c.sensors[11].name == "processes");
  CHECK(c.sensors[11].interval == std::chrono::milliseconds(10000));
  CHECK(c.sensors[12].name == "clock");
  CHECK_FALSE(c.sensors[12].interval.has_value());  // the collector's
  REQUIRE(c.routes.size() == 11);
  CHECK(c.routes[1].path == "/assets/*");
  CHECK(c.routes[2].path == "/fleet");
  CHECK(c.routes[2].plugin == "dashboard");
  CHECK(c.routes[6].path == "/api/alerts");
  CHECK(c.routes[6].plugin == "alerts");
  CHECK(c.routes[8].path == "/metrics");
  CHECK(c.routes[9].path == "/api/fleet");
  CHECK(c.routes[10].path == "/peer/*");
  CHECK(c.peers.empty());
}

TEST_CASE("config: the built-in default and an empty user file are the same configuration") {
  Config a = default_config("/x"), b = load_config_text("", "f.toml", "/x");
  CHECK(a.http.bind.str() == b.http.bind.str());
  CHECK(a.collector.stale_after == b.collector.stale_after);
  CHECK(a.sensors.size() == b.sensors.size());
  CHECK(a.source == "<built-in default>");
}

TEST_CASE("config: every accepted form") {
  Config c = load(R"(
[agent]
data_dir = "/var/lib/kiwi"
log_level = "debug"
[http]
bind = "[::1]:9000"
threads = 8
keep_alive = "30s"
max_connections = 1000
[collector]
interval = "500ms"
retention = "7d"
stale_after = "1h30m"
snapshot_path = ""
[[sensor]]
plugin = "cpu"
name = "cpu-fast"
interval = "1s"
[sensor.options]
anything = 1
[[sensor]]
plugin = "./plugins/kiwi-sensor-custom.so"
name = "custom"
[[route]]
path = "/x/*"
handler = "dashboard"
)");
  CHECK(c.agent.data_dir == "/var/lib/kiwi");
  CHECK(c.agent.log_level == kiwi::LogLevel::debug);
  CHECK(c.http.bind.ipv6);
  CHECK(c.http.bind.host == "::1");
  CHECK(c.http.bind.port == 9000);
  CHECK(c.http.threads == 8);
  CHECK(c.http.keep_alive == Millis(30'000));
  CHECK(c.collector.interval == Millis(500));
  CHECK(c.collector.retention == Millis(7 * 86'400'000LL));
  CHECK(c.collector.stale_after == Millis(5'400'000));
  CHECK(c.collector.snapshot_path.empty());
  REQUIRE(c.sensors.size() == 2);  // replaces the default list
  CHECK(c.sensors[0].name == "cpu-fast");
  CHECK(c.sensors[0].interval == Millis(1000));
  CHECK(toml_table(*c.sensors[0].options).contains("anything"));
  CHECK(c.sensors[0].plugin_pos.line == 16);
  CHECK(c.routes.size() == 1);  // replaces the default routes
}

TEST_CASE("config: a user file without [[sensor]] keeps the default sensors") {
  Config c = load("[http]\nbind = \"0.0.0.0:8095\"\n");
  CHECK(c.sensors.size() == 13);
  CHECK(c.http.bind.host == "0.0.0.0");
}

TEST_CASE("config: bind addresses") {
  CHECK(parse_bind("127.0.0.1:8095")->port == 8095);
  CHECK(parse_bind("[::]:80")->ipv6);
  CHECK(parse_bind("localhost:1")->host == "127.0.0.1");
  for (auto bad : {"8095", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1",
                   "[::1]8095", "::1:8095", "example.com:80", "256.0.0.1:80", "127.0.0.1:80x"})
    CHECK_FALSE(parse_bind(bad).has_value());
}

TEST_CASE("config: each error names file:line:col, the key, the value and what is accepted") {
  SECTION("wrong type") {
    CHECK(error_of("[http]\nthreads = \"four\"\n") ==
          "kiwi.toml:2:11: http.threads: \"four\" is not a thread count; accepted: \"auto\" or "
          "1..256");
    CHECK(error_of("[http]\nthreads = 2.5\n") ==
          "kiwi.toml:2:11: http.threads: 2.5 is not an integer; accepted: 1..256");
  }
  SECTION("out of range") {
    CHECK(error_of("[http]\nthreads = 0\n") ==
          "kiwi.toml:2:11: http.threads: 0 is out of range; accepted: 1..256");
    CHECK(error_of("[http]\nmax_connections = 70000\n") ==
          "kiwi.toml:2:19: http.max_connections: 70000 is out of range; accepted: 1..65536");
    CHECK(error_of("[collector]\ninterval = \"50ms\"\n") ==
          "kiwi.toml:2:12: collector.interval: \"50ms\" is out of range (accepted: 100ms to 1h)");
  }
  SECTION("bad duration") {
    CHECK(error_of("[collector]\ninterval = \"1 second\"\n") ==
          "kiwi.toml:2:12: collector.interval: \"1 second\" is not a duration; use a whole number "
          "with ms, s, m, h or d, e.g. \"500ms\", \"1s\", \"24h\" (accepted: 100ms to 1h)");
    CHECK_THAT(error_of("[collector]\nretention = 86400\n"),
               Catch::StartsWith("kiwi.toml:2:13: collector.retention: 86400 is not a duration; "
                                 "write a string such as \"500ms\""));
  }
  SECTION("bad bind") {
    CHECK_THAT(error_of("[http]\nbind = \"localhost\"\n"),
               Catch::StartsWith("kiwi.toml:2:8: http.bind: \"localhost\" is not an address; use "
                                 "\"host:port\""));
  }
  SECTION("unknown key") {
    CHECK(error_of("[http]\nport = 80\n") ==
          "kiwi.toml:2:1: http.port: unknown key; accepted in [http]: bind, threads, keep_alive, "
          "max_connections, cors_origins, auth, tls");
    CHECK(error_of("[colector]\n") ==
          "kiwi.toml:1:2: colector: unknown key; accepted here: agent, http, collector, alerts, "
          "sensor, route, remote_write, mqtt, notify, alert, peer");
    CHECK(error_of("[[sensor]]\nplugin = \"cpu\"\nintervall = \"1s\"\n") ==
          "kiwi.toml:3:1: sensor.intervall: unknown key; accepted here: plugin, name, interval, "
          "timeout, labels, options");
  }
  SECTION("CORS origins are exact, never a wildcard") {
    CHECK(error_of("[http]\ncors_origins = [\"*\"]\n") ==
          "kiwi.toml:2:17: http.cors_origins: \"*\" is not an origin; use scheme://host[:port] "
          "exactly as the browser sends it (no wildcard, no path)");
    CHECK(load("[http]\ncors_origins = [\"http://10.0.0.2:3000\"]\n").http.cors_origins.size() ==
          1);
  }
  SECTION("bad log level") {
    CHECK(error_of("[agent]\nlog_level = \"verbose\"\n") ==
          "kiwi.toml:2:13: agent.log_level: \"verbose\" is not a log level; use error, warn, info "
          "or debug");
  }
  SECTION("sensor without a plugin") {
    CHECK(error_of("[[sensor]]\nname = \"x\"\n") ==
          "kiwi.toml:1:1: sensor.plugin: missing; name a plugin, e.g. plugin = \"cpu\"");
  }
  SECTION("a sensor's or an output's name: one check, letters, digits, '_', '-' or '.'") {
    CHECK(error_of("[[sensor]]\nplugin = \"cpu\"\nname = \"my cpu\"\n") ==
          "kiwi.toml:3:8: sensor.name: \"my cpu\" is not a valid name; use letters, digits, '_', "
          "'-' or '.'");
    CHECK(error_of("[[remote_write]]\nname = \"\"\n") ==
          "kiwi.toml:2:8: remote_write.name: \"\" is not a valid name; use letters, digits, '_', "
          "'-' or '.'");
    CHECK(load("[[sensor]]\nplugin = \"cpu\"\nname = \"cpu-0.fast_1\"\n").sensors[0].name ==
          "cpu-0.fast_1");
  }
  SECTION("two sensors with one name") {
    CHECK(error_of("[[sensor]]\nplugin = \"cpu\"\n[[sensor]]\nplugin = \"cpu\"\n") ==
          "kiwi.toml:3:1: sensor.name: \"cpu\" is used by two [[sensor]] entries (the other at "
          "kiwi.toml:1:1); give each a unique name = \"...\"");
  }
  SECTION("a sensor named as the agent's own report, by its name or its plugin's") {
    CHECK(error_of("[[sensor]]\nplugin = \"cpu\"\nname = \"agent\"\n") ==
          "kiwi.toml:1:1: sensor.name: \"agent\" is the name of one of the agent's own reports; "
          "give this sensor another name");
    CHECK(error_of(
              "[[sensor]]\nplugin = \"cpu\"\n[[sensor]]\nplugin = \"./kiwi-sensor-agent.so\"\n") ==
          "kiwi.toml:3:1: sensor.name: \"agent\" is the name of one of the agent's own reports; "
          "give this sensor another name");
    CHECK(load("[[sensor]]\nplugin = \"./kiwi-sensor-agent.so\"\nname = \"agent-2\"\n")
              .sensors[0]
              .name == "agent-2");
  }
  SECTION("sensor interval not a multiple of the collector's") {
    CHECK(
        error_of("[[sensor]]\nplugin = \"cpu\"\ninterval = \"1500ms\"\n") ==
        "kiwi.toml:1:1: sensor.interval: \"1500ms\" is not a multiple of collector.interval (1s)");
  }
  SECTION("stale_after shorter than the interval") {
    CHECK(error_of("[collector]\ninterval = \"10s\"\nstale_after = \"5s\"\n") ==
          "kiwi.toml:3:15: collector.stale_after: \"5s\" is shorter than collector.interval (10s); "
          "use at least the interval");
  }
  SECTION("route paths") {
    CHECK_THAT(error_of("[[route]]\npath = \"api\"\nhandler = \"current\"\n"),
               Catch::StartsWith("kiwi.toml:2:8: route.path: \"api\" is not a route path"));
    CHECK_THAT(error_of("[[route]]\npath = \"/a*b\"\nhandler = \"current\"\n"),
               Catch::StartsWith("kiwi.toml:2:8: route.path: \"/a*b\" is not a route path"));
    CHECK(error_of("[[route]]\npath = \"/a\"\nhandler = \"x\"\n[[route]]\npath = \"/a\"\nhandler = "
                   "\"y\"\n") ==
          "kiwi.toml:4:1: route.path: \"/a\" is routed twice (the other at kiwi.toml:1:1)");
  }
  SECTION("TOML syntax") {
    CHECK_THAT(error_of("[http]\nthreads = = 4\n"), Catch::StartsWith("kiwi.toml:2:11: "));
  }
  SECTION("unreadable file") {
    CHECK_THROWS_WITH(load_config_file("/nonexistent/kiwi.toml", "/x"),
                      "/nonexistent/kiwi.toml: cannot read the config file: No such file or "
                      "directory");
  }
}

TEST_CASE("config: messages a user needs (issue 11, items 7, 9 and 10)") {
  SECTION("a directory given as the config file is refused, not read as an empty file") {
    CHECK_THROWS_WITH(load_config_file("/etc/", "/x"),
                      "/etc/: is a directory; give the path of a TOML file, e.g. "
                      "/etc/kiwi-agent/kiwi-agent.toml");
    CHECK_THROWS_AS(load_config_file("/tmp", "/x"), ConfigError);
  }
  SECTION("snapshot_path must name a file") {
    CHECK(error_of("[collector]\nsnapshot_path = \"/tmp/\"\n") ==
          "kiwi.toml:2:17: collector.snapshot_path: \"/tmp/\" is a directory; name a file in it, "
          "e.g. \"/run/kiwi-agent/current.json\", or \"\" for no snapshot file");
    CHECK_THAT(error_of("[collector]\nsnapshot_path = \"/tmp\"\n"),
               Catch::Contains("\"/tmp\" is a directory"));
    CHECK(load("[collector]\nsnapshot_path = \"\"\n").collector.snapshot_path.empty());
  }
  SECTION("retention shorter than the interval: where, and both values") {
    CHECK(error_of("[collector]\ninterval = \"1h\"\nretention = \"30m\"\n") ==
          "kiwi.toml:3:13: collector.retention: \"30m\" is shorter than collector.interval (1h); "
          "keep at least one interval of history");
  }
  SECTION("a plugin given as a path needs no name: it is named after the file") {
    Config c = load(
        "[[sensor]]\nplugin = \"/opt/x/kiwi-sensor-gpu.so\"\n[[sensor]]\nplugin = "
        "\"./my probe.so\"\n[[sensor]]\nplugin = \"kiwi-sensor-fan.so\"\n");
    REQUIRE(c.sensors.size() == 3);
    CHECK(c.sensors[0].name == "gpu");
    CHECK(c.sensors[1].name == "my_probe");
    CHECK(c.sensors[2].name == "fan");
    CHECK(error_of(
              "[[sensor]]\nplugin = \"/a/kiwi-sensor-gpu.so\"\n[[sensor]]\nplugin = \"gpu\"\n") ==
          "kiwi.toml:3:1: sensor.name: \"gpu\" is used by two [[sensor]] entries (the other at "
          "kiwi.toml:1:1); give each a unique name = \"...\"");
  }
  SECTION("plugin_dir remembers where it was set") {
    Config c = load("[agent]\nplugin_dir = \"/nowhere\"\n");
    CHECK(c.agent.plugin_dir_pos.str() == "kiwi.toml:2:14");
  }
}

TEST_CASE("config: a sensor's timeout is a duration of 10ms..1h, for sensors only") {
  Config c = load(
      "[[sensor]]\nplugin = \"cpu\"\ntimeout = \"2s\"\n[[sensor]]\nplugin = \"memory\"\n"
      "[[sensor]]\nplugin = \"diskio\"\ntimeout = \"10ms\"\n");
  REQUIRE(c.sensors.size() == 3);
  CHECK(c.sensors[0].timeout == Millis(2000));
  CHECK_FALSE(c.sensors[1].timeout.has_value());  // the sensor's interval
  CHECK(c.sensors[2].timeout == Millis(10));
  CHECK(load("[[sensor]]\nplugin = \"cpu\"\ntimeout = \"1h\"\n").sensors[0].timeout ==
        Millis(3'600'000));
  CHECK(error_of("[[sensor]]\nplugin = \"cpu\"\ntimeout = \"5ms\"\n") ==
        "kiwi.toml:3:11: sensor.timeout: \"5ms\" is out of range (accepted: 10ms to 1h)");
  CHECK(error_of("[[sensor]]\nplugin = \"cpu\"\ntimeout = \"61m\"\n") ==
        "kiwi.toml:3:11: sensor.timeout: \"61m\" is out of range (accepted: 10ms to 1h)");
  CHECK(error_of("[[sensor]]\nplugin = \"cpu\"\ntimeout = \"2 s\"\n") ==
        "kiwi.toml:3:11: sensor.timeout: \"2 s\" is not a duration; use a whole number with ms, s, "
        "m, h or d, e.g. \"500ms\", \"1s\", \"24h\" (accepted: 10ms to 1h)");
  CHECK_THAT(error_of("[[sensor]]\nplugin = \"cpu\"\ntimeout = 2\n"),
             Catch::StartsWith("kiwi.toml:3:11: sensor.timeout: 2 is not a duration; write a "
                               "string such as \"500ms\""));
  CHECK(error_of("[[route]]\npath = \"/a\"\nhandler = \"current\"\ntimeout = \"2s\"\n") ==
        "kiwi.toml:4:1: route.timeout: unknown key; accepted here: path, handler, options");
}

TEST_CASE(
    "config: same_instance compares what a sensor or route is, not its schedule or where it is "
    "written") {
  Config a = load(R"(
[[sensor]]
plugin = "cpu"
interval = "2s"
timeout = "1s"
[sensor.options]
x = 1
[[sensor]]
plugin = "memory"
[[route]]
path = "/a"
handler = "current"
)");
  Config b = load(R"(
# moved down a few lines, same settings


[[sensor]]
timeout = "1s"
interval = "2s"
plugin = "cpu"
  [sensor.options]
  x = 1
[[sensor]]
plugin = "memory"
[sensor.options]
[[route]]
handler = "current"
path = "/a"
)");
  REQUIRE(a.sensors.size() == 2);
  REQUIRE(b.sensors.size() == 2);
  CHECK(same_instance(a.sensors[0], b.sensors[0]));
  CHECK(same_instance(a.sensors[1], b.sensors[1]));  // no options table == an empty one
  CHECK(same_instance(b.sensors[1], a.sensors[1]));
  CHECK(same_instance(a.routes[0], b.routes[0]));
  CHECK_FALSE(same_instance(a.sensors[0], a.sensors[1]));

  auto sensor = [](const std::string& body) {
    return load("[[sensor]]\nplugin = \"cpu\"\ninterval = \"2s\"\ntimeout = \"1s\"\n" + body)
        .sensors[0];
  };
  // Each entry's options point into its Config's documents: keep the configs alive.
  Config base = load("[[sensor]]\nplugin = \"cpu\"\ninterval = \"2s\"\ntimeout = \"1s\"\n");
  const PluginEntry& e = base.sensors[0];
  CHECK(same_instance(e, sensor("")));
  Config c1 = load("[[sensor]]\nplugin = \"cpu\"\ninterval = \"2s\"\n");
  CHECK(same_instance(e, c1.sensors[0]));  // timeout: the schedule, not the instance
  Config c2 = load("[[sensor]]\nplugin = \"cpu\"\ninterval = \"2s\"\ntimeout = \"2s\"\n");
  CHECK(same_instance(e, c2.sensors[0]));
  Config c3 = load("[[sensor]]\nplugin = \"cpu\"\ntimeout = \"1s\"\n");
  CHECK(same_instance(e, c3.sensors[0]));  // interval: the schedule too
  Config c4 =
      load("[[sensor]]\nplugin = \"cpu\"\nname = \"c\"\ninterval = \"2s\"\ntimeout = \"1s\"\n");
  CHECK_FALSE(same_instance(e, c4.sensors[0]));
  // The plugin as written: the same file under another spelling is another setting.
  Config c5 = load(
      "[[sensor]]\nplugin = \"kiwi-sensor-cpu.so\"\nname = \"cpu\"\ninterval = \"2s\"\ntimeout = "
      "\"1s\"\n");
  CHECK_FALSE(same_instance(e, c5.sensors[0]));
  Config c6 = load(
      "[[sensor]]\nplugin = \"cpu\"\ninterval = \"2s\"\ntimeout = \"1s\"\n[sensor.options]\nx = "
      "1\n");
  CHECK_FALSE(same_instance(e, c6.sensors[0]));
  Config c7 = load(
      "[[sensor]]\nplugin = \"cpu\"\ninterval = \"2s\"\ntimeout = \"1s\"\n[sensor.options]\nx = "
      "2\n");
  CHECK_FALSE(same_instance(c6.sensors[0], c7.sensors[0]));  // option values
  Config c8 = load(
      "[[sensor]]\nplugin = \"cpu\"\ninterval = \"2s\"\ntimeout = \"1s\"\n[sensor.options]\nx = "
      "1.0\n");
  CHECK_FALSE(same_instance(c6.sensors[0], c8.sensors[0]));  // and types
  Config r = load("[[route]]\npath = \"/b\"\nhandler = \"current\"\n");
  CHECK_FALSE(same_instance(a.routes[0], r.routes[0]));
}

TEST_CASE("config: a reload refuses a new data_dir, procfs, sysfs or snapshot_path") {
  Config running = load(R"(
[agent]
data_dir = "/a"
procfs = "/host/proc"
[collector]
snapshot_path = "/run/k/current.json"
)");
  CHECK(running.where("agent.data_dir").str() == "kiwi.toml:3:12");
  CHECK(running.where("agent.procfs").str() == "kiwi.toml:4:10");
  CHECK(running.where("agent.sysfs").file == "<built-in default>");  // the built-in default
  CHECK(running.where("collector.snapshot_path").str() == "kiwi.toml:6:17");

  auto error_of = [&](const std::string& text) -> std::string {
    Config next = load_config_text(text, "new.toml", "/opt/kiwi/bin");
    try {
      check_reloadable(running, next);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  };
  // Everything else may change, and the same values may be written elsewhere.
  CHECK(error_of(R"(
[collector]
interval = "2s"
snapshot_path = "/run/k/current.json"
[agent]
log_level = "debug"
plugin_dir = "/elsewhere"
procfs = "/host/proc"
data_dir = "/a"
[http]
bind = "0.0.0.0:9000"
[[sensor]]
plugin = "memory"
)") == "");
  CHECK(error_of("[agent]\ndata_dir = \"/b\"\nprocfs = \"/host/proc\"\n[collector]\n"
                 "snapshot_path = \"/run/k/current.json\"\n") ==
        "new.toml:2:12: agent.data_dir: changed from \"/a\" to \"/b\"; that takes a restart (the "
        "running configuration stays)");
  CHECK(error_of("[agent]\ndata_dir = \"/a\"\nprocfs = \"/proc2\"\nsysfs = \"/sys2\"\n") ==
        "new.toml:3:10: agent.procfs: changed from \"/host/proc\" to \"/proc2\"; that takes a "
        "restart (the running configuration stays)");
  CHECK(error_of("[agent]\ndata_dir = \"/a\"\nprocfs = \"/host/proc\"\nsysfs = \"/sys2\"\n") ==
        "new.toml:4:9: agent.sysfs: changed from \"/sys\" to \"/sys2\"; that takes a restart (the "
        "running configuration stays)");
  CHECK(error_of("[agent]\ndata_dir = \"/a\"\nprocfs = \"/host/proc\"\n[collector]\n"
                 "snapshot_path = \"\"\n") ==
        "new.toml:5:17: collector.snapshot_path: changed from \"/run/k/current.json\" to \"\"; "
        "that takes a restart (the running configuration stays)");
  // Removed: back to the built-in default, named at the new file.
  CHECK(error_of("[agent]\nprocfs = \"/host/proc\"\n") ==
        "new.toml:0:0: agent.data_dir: changed from \"/a\" to the default "
        "\"kiwi-data\"; that takes a restart (the running configuration stays)");
}

TEST_CASE("config: include appends the [[sensor]] and [[route]] entries of conf.d files, sorted") {
  kiwi_test::TempDir dir;
  namespace fs = std::filesystem;
  auto write = [&](const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  };
  const std::string main = (dir.path / "kiwi.toml").string();
  const std::string d = (dir.path / "conf.d").string();
  SECTION("after the defaults when the main file has no list; by name; relative to the file") {
    write(main, "[agent]\ninclude = [\"conf.d/*.toml\"]\n");
    write(dir.path / "conf.d/20-gpu.toml", "[[sensor]]\nplugin = \"gpu\"\n");
    write(dir.path / "conf.d/10-fan.toml",
          "[[sensor]]\nplugin = \"fan\"\n[[route]]\npath = \"/fan\"\nhandler = \"current\"\n");
    write(dir.path / "conf.d/README", "not toml, not matched\n");
    Config c = load_config_file(main, "/opt/kiwi/bin");
    REQUIRE(c.sensors.size() == 15);
    CHECK(c.sensors[12].name == "clock");  // the thirteen defaults first
    CHECK(c.sensors[13].name == "fan");
    CHECK(c.sensors[14].name == "gpu");
    CHECK(c.sensors[14].pos.str() == d + "/20-gpu.toml:1:1");
    CHECK(c.routes.back().path == "/fan");
    CHECK(c.agent.include == std::vector<std::string>{"conf.d/*.toml"});
  }
  SECTION("after the main file's own list") {
    write(main, "[agent]\ninclude = [\"conf.d/*.toml\"]\n[[sensor]]\nplugin = \"memory\"\n");
    write(dir.path / "conf.d/gpu.toml", "[[sensor]]\nplugin = \"gpu\"\n");
    Config c = load_config_file(main, "/opt/kiwi/bin");
    REQUIRE(c.sensors.size() == 2);
    CHECK(c.sensors[0].name == "memory");
    CHECK(c.sensors[1].name == "gpu");
  }
  SECTION("a missing directory includes nothing") {
    write(main, "[agent]\ninclude = [\"conf.d/*.toml\", \"" + (dir.path / "none").string() +
                    "/*.toml\"]\n");
    CHECK(load_config_file(main, "/opt/kiwi/bin").sensors.size() == 13);
  }
  SECTION("an included file holds entries only") {
    write(main, "[agent]\ninclude = [\"conf.d/*.toml\"]\n");
    write(dir.path / "conf.d/bad.toml", "[[sensor]]\nplugin = \"gpu\"\n\n[http]\nthreads = 2\n");
    CHECK_THROWS_WITH(load_config_file(main, "/opt/kiwi/bin"),
                      d + "/bad.toml:4:2: http: an included file may hold only [[sensor]] and "
                          "[[route]] entries; set the other keys in the main configuration file");
  }
  SECTION("a name twice across files names both places") {
    write(main, "[agent]\ninclude = [\"conf.d/*.toml\"]\n[[sensor]]\nplugin = \"gpu\"\n");
    write(dir.path / "conf.d/gpu.toml", "\n[[sensor]]\nplugin = \"gpu\"\n");
    CHECK_THROWS_WITH(load_config_file(main, "/opt/kiwi/bin"),
                      d +
                          "/gpu.toml:2:1: sensor.name: \"gpu\" is used by two [[sensor]] entries "
                          "(the other at " +
                          main + ":3:1); give each a unique name = \"...\"");
  }
  SECTION("an included file's TOML error names it") {
    write(main, "[agent]\ninclude = [\"conf.d/*.toml\"]\n");
    write(dir.path / "conf.d/x.toml", "[[sensor]]\nplugin = = 1\n");
    CHECK_THROWS_WITH(load_config_file(main, "/opt/kiwi/bin"), Catch::StartsWith(d + "/x.toml:2:"));
  }
  SECTION("include must be a list") {
    write(main, "[agent]\ninclude = \"conf.d/*.toml\"\n");
    CHECK_THROWS_WITH(
        load_config_file(main, "/opt/kiwi/bin"),
        Catch::StartsWith(main + ":2:11: agent.include: \"conf.d/*.toml\" is not a list"));
  }
}

TEST_CASE(
    "config: [[remote_write]] has none by default, and its agent keys are checked with places") {
  CHECK(load("").outputs.empty());
  Config c = load(
      "[[remote_write]]\nurl = \"http://a/api/v1/write\"\n"
      "[[remote_write]]\nname = \"b\"\nurl = \"http://b/\"\ninterval = \"30s\"\n"
      "series = [\"cpu_*\"]\nmax_samples = 500\n");
  REQUIRE(c.outputs.size() == 2);
  CHECK(c.outputs[0].name == "remote_write");
  CHECK(c.outputs[0].plugin == "remote_write");
  CHECK(c.outputs[0].interval == Millis(10'000));
  CHECK(c.outputs[0].series.empty());
  CHECK(c.outputs[0].max_samples == 10'000);
  CHECK(c.outputs[1].name == "b");
  CHECK(c.outputs[1].interval == Millis(30'000));
  CHECK(c.outputs[1].series == std::vector<std::string>{"cpu_*"});
  CHECK(c.outputs[1].max_samples == 500);
  REQUIRE(c.outputs[1].options);
  CHECK(
      toml_table(*c.outputs[1].options).contains("url"));  // the plugin's options: the table itself
  CHECK(error_of("[[remote_write]]\nurl = \"x\"\ninterval = \"500ms\"\n") ==
        "kiwi.toml:3:12: remote_write.interval: \"500ms\" is out of range (accepted: 1s to 1h)");
  CHECK(error_of("[[remote_write]]\n[[remote_write]]\n") ==
        "kiwi.toml:2:1: remote_write.name: \"remote_write\" is used by two outputs (the other, a "
        "[[remote_write]], at kiwi.toml:1:1); give each a unique name = \"...\"");
  CHECK(error_of("[[remote_write]]\nseries = \"cpu\"\n")
            .starts_with("kiwi.toml:2:10: remote_write.series: must be a list"));
  CHECK(
      error_of("remote_write = 1\n").starts_with("kiwi.toml:1:16: remote_write: must be an array"));
}

TEST_CASE("config: [[mqtt]] is an output beside [[remote_write]], with its own defaults") {
  Config c = load(
      "[[remote_write]]\nurl = \"http://a/api/v1/write\"\n"
      "[[mqtt]]\nurl = \"mqtt://broker.lan:1883\"\nusername = \"kiwi\"\n"
      "[[mqtt]]\nname = \"second\"\ninterval = \"1s\"\nseries = []\n"
      "options = { url = \"mqtts://broker.lan\" }\n");
  REQUIRE(c.outputs.size() == 3);
  CHECK(c.outputs[0].table == "remote_write");
  CHECK(c.outputs[0].series.empty());
  CHECK(c.outputs[1].table == "mqtt");
  CHECK(c.outputs[1].plugin == "mqtt");
  CHECK(c.outputs[1].name == "mqtt");
  CHECK(c.outputs[1].interval == Millis(10'000));
  CHECK(c.outputs[1].max_samples == 10'000);
  // By default the gauges of the dashboard's cards, not every series.
  CHECK(c.outputs[1].series == std::vector<std::string>{"cpu_usage_ratio", "thermal_celsius",
                                                        "memory_used_ratio", "storage_used_ratio",
                                                        "power_under_voltage_alarm"});
  // Flat options are [[mqtt]]'s documented shape: no warning (as [[notify]]).
  CHECK(c.outputs[1].options_flat);
  CHECK(c.warnings.size() == 1);  // the flat [[remote_write]]'s alone
  CHECK(toml_table(*c.outputs[1].options).contains("username"));
  CHECK(c.outputs[2].name == "second");
  CHECK(c.outputs[2].interval == Millis(1000));
  CHECK(c.outputs[2].series.empty());
  CHECK_FALSE(c.outputs[2].options_flat);
  // One name per output, across both tables: it keys the cursor in the database.
  CHECK(error_of("[[remote_write]]\nname = \"out\"\n[[mqtt]]\nname = \"out\"\n") ==
        "kiwi.toml:3:1: mqtt.name: \"out\" is used by two outputs (the other, a "
        "[[remote_write]], at kiwi.toml:1:1); give each a unique name = \"...\"");
  CHECK(error_of("[[mqtt]]\ninterval = \"100ms\"\n") ==
        "kiwi.toml:2:12: mqtt.interval: \"100ms\" is out of range (accepted: 1s to 1h)");
}

TEST_CASE("config: --print-config writes each output as its own table, which loads the same") {
  const Config c = load(
      "[[remote_write]]\noptions = { url = \"http://a/api/v1/write\", labels = { a = \"b\" } }\n"
      "[[mqtt]]\nurl = \"mqtt://broker.lan\"\nnode = \"barn\"\n");
  const std::string text = render_toml(c);
  CHECK_THAT(text, Catch::Contains("[[mqtt]]\nplugin = \"mqtt\"\nname = \"mqtt\"\n"));
  const Config again = load(text);
  REQUIRE(again.outputs.size() == 2);
  CHECK(again.outputs[0].table == "remote_write");
  CHECK(toml_table(*again.outputs[0].options) == toml_table(*c.outputs[0].options));
  // The flat shape as written: the plugin's keys beside the agent's.
  CHECK(again.outputs[1].table == "mqtt");
  CHECK(again.outputs[1].options_flat);
  CHECK(toml_table(*again.outputs[1].options)["node"].value<std::string>() == "barn");
  CHECK(toml_table(*again.outputs[1].options)["url"].value<std::string>() == "mqtt://broker.lan");
  CHECK(again.warnings.empty());
}

TEST_CASE("config: [[remote_write]] takes its plugin's options in options = {...}, as sensors do") {
  Config c = load(
      "[[remote_write]]\nname = \"a\"\ninterval = \"30s\"\n"
      "options = { url = \"http://a/api/v1/write\", timeout = \"2s\" }\n"
      "[[remote_write]]\nname = \"b\"\n[remote_write.options]\nurl = \"http://b/\"\n");
  REQUIRE(c.outputs.size() == 2);
  CHECK(c.warnings.empty());
  CHECK(c.outputs[0].interval == Millis(30'000));
  REQUIRE(c.outputs[0].options);
  CHECK_FALSE(c.outputs[0].options_flat);
  CHECK(toml_table(*c.outputs[0].options).size() == 2);  // the sub-table alone
  CHECK(toml_table(*c.outputs[1].options).contains("url"));
  CHECK(error_of("[[remote_write]]\noptions = \"x\"\n") ==
        "kiwi.toml:2:11: remote_write.options: must be a table");
  // Both shapes at once: a key beside options = {...} is not the plugin's.
  CHECK(error_of("[[remote_write]]\nurl = \"http://a/\"\noptions = { timeout = \"2s\" }\n") ==
        "kiwi.toml:2:1: remote_write.url: unknown key; accepted here: plugin, name, interval, "
        "series, max_samples, options");
}

TEST_CASE("config: the flat [[remote_write]] still works, with one warning naming the new shape") {
  Config c = load(
      "[agent]\nlog_level = \"info\"\n\n[[remote_write]]\nname = \"a\"\nurl = \"http://a/\"\n"
      "timeout = \"2s\"\n[[remote_write]]\nname = \"b\"\n");
  REQUIRE(c.outputs.size() == 2);
  CHECK(c.outputs[0].options_flat);
  CHECK(toml_table(*c.outputs[0].options).contains("url"));
  CHECK_FALSE(c.outputs[1].options_flat);  // no options at all: nothing to say
  CHECK(c.warnings ==
        std::vector<std::string>{
            "kiwi.toml:4:1: remote_write: options given flat in the table; put them in options = "
            "{ timeout = ..., url = ... } (the flat shape still works)"});
}

TEST_CASE("config: text on which toml++ 3.3 trips its own assertion is a ConfigError (exit 2)") {
  // Found by the config fuzzer (tests/fuzz/corpus/config/toml-assert): a debug build of toml++
  // aborts in an assertion; the release build reports a parse error, and so it must stay.
  CHECK_THROWS_AS(load_config_text("[[= \"/mdt-ics\"\nh\nsl", "fuzz.toml", "/x"), ConfigError);
}

TEST_CASE("config: every input of the config fuzzer's corpus is a Config or a ConfigError") {
  // tests/fuzz/corpus/config, as tools/fuzz.sh --regression runs it, without clang: the loader
  // gives a configuration or its exit-2 error, nothing else.
  std::size_t inputs = 0, loaded = 0;
  for (auto& f : std::filesystem::directory_iterator(KIWI_SOURCE_DIR "/tests/fuzz/corpus/config")) {
    INFO(f.path().filename().string());
    std::ifstream in(f.path(), std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ++inputs;
    try {
      load_config_text(text, "fuzz.toml", "/nonexistent");
      ++loaded;
    } catch (const ConfigError&) {
    }
  }
  CHECK(inputs >= 17);
  CHECK(loaded >= 15);  // the samples load; toml-assert, at least, does not
}

TEST_CASE("config: a sensor's labels are a table of label names and strings, for sensors only") {
  Config c = load(
      "[[sensor]]\nplugin = \"cpu\"\nlabels = { room = \"lab\", rack = \"2\" }\n"
      "[[sensor]]\nplugin = \"memory\"\n");
  REQUIRE(c.sensors.size() == 2);
  CHECK(c.sensors[0].labels == std::map<std::string, std::string>{{"rack", "2"}, {"room", "lab"}});
  CHECK(c.sensors[1].labels.empty());
  CHECK_THAT(error_of("[[sensor]]\nplugin = \"cpu\"\nlabels = { \"my room\" = \"lab\" }\n"),
             Catch::StartsWith("kiwi.toml:3:") &&
                 Catch::Contains("\"my room\" is not a valid label name"));
  CHECK_THAT(error_of("[[sensor]]\nplugin = \"cpu\"\nlabels = { __name__ = \"x\" }\n"),
             Catch::Contains("\"__name__\" is not a valid label name"));
  CHECK_THAT(error_of("[[sensor]]\nplugin = \"cpu\"\nlabels = { room = 2 }\n"),
             Catch::StartsWith("kiwi.toml:3:"));
  CHECK_THAT(error_of("[[sensor]]\nplugin = \"cpu\"\nlabels = \"room=lab\"\n"),
             Catch::Contains("is not a table of labels, e.g. { room = \"lab\" }"));
  CHECK_THAT(error_of("[[route]]\npath = \"/a\"\nhandler = \"current\"\nlabels = {}\n"),
             Catch::Contains("route.labels: unknown key"));
}

TEST_CASE(
    "config: a tier kept shorter than the finer one before it is raised to it, with a warning") {
  Config c =
      load("[collector]\nretention = \"7d\"\nminute_retention = \"2d\"\nhour_retention = \"1d\"\n");
  CHECK(c.collector.retention == Millis(7 * 86'400'000LL));
  CHECK(c.collector.minute_retention == Millis(7 * 86'400'000LL));
  CHECK(c.collector.hour_retention == Millis(7 * 86'400'000LL));
  CHECK(c.warnings == std::vector<std::string>{
                          "kiwi.toml:3:20: collector.minute_retention: \"2d\" is shorter than "
                          "collector.retention; kept 7d instead",
                          "kiwi.toml:4:18: collector.hour_retention: \"1d\" is shorter than "
                          "collector.minute_retention; kept 7d instead"});
  // Each default is at least the one before: a longer retention raises them without a word.
  Config quiet = load("[collector]\nretention = \"90d\"\n");
  CHECK(quiet.collector.minute_retention == Millis(90 * 86'400'000LL));
  CHECK(quiet.collector.hour_retention == Millis(365 * 86'400'000LL));
  CHECK(quiet.warnings.empty());
}
