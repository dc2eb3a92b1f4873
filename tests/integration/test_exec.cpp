// The exec sensor in the real agent: programs written at test time (sh and Python), their metrics
// in /api/current, /metrics and /api/history, and every way a program can fail.
#include <signal.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "checks.hpp"

using namespace kiwi_test;
using namespace std::chrono_literals;

namespace {

// Writes an executable program into `dir`; returns its path.
std::string program(const TempDir& dir, const std::string& name, const std::string& text) {
  const auto path = dir.path / name;
  write_text(path, text);
  ::chmod(path.c_str(), 0755);
  return path.string();
}

// A [[sensor]] entry for the exec plugin; `more` goes into [sensor.options] after `command`.
std::string exec_sensor(const std::string& name, const std::string& command,
                        const std::string& more = "", const std::string& sensor_lines = "") {
  return "[[sensor]]\nplugin = \"exec\"\nname = \"" + name + "\"\n" + sensor_lines +
         "[sensor.options]\ncommand = [\"" + command + "\"]\n" + more + "\n";
}

// /api/current once `pred` holds for it (at most 10 s); `what` names what was waited for.
template <class Pred>
rapidjson::Document wait_current(HttpClient& c, const std::string& what, Pred pred) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  std::string last;
  while (std::chrono::steady_clock::now() < until) {
    auto r = c.get("/api/current");
    if (r.status == 200) {
      rapidjson::Document d;
      d.Parse(r.body.c_str(), r.body.size());
      last = r.body;
      if (!d.HasParseError() && pred(d)) return d;
    }
    std::this_thread::sleep_for(20ms);
  }
  FAIL(what << " never got there; last /api/current: " << last);
  throw;
}

// The sensor's entry in /api/current once `pred` holds for it (at most 10 s).
template <class Pred>
rapidjson::Document wait_sensor(HttpClient& c, const std::string& name, Pred pred) {
  return wait_current(c, "sensor " + name, [&](const rapidjson::Document& d) {
    return d["sensors"].HasMember(name.c_str()) && pred(d["sensors"][name.c_str()]);
  });
}

std::string status_of(const rapidjson::Value& s) {
  return s["status"].GetString();
}
std::string message_of(const rapidjson::Value& s) {
  return s.HasMember("message") ? s["message"].GetString() : "";
}

// The sensor's error message, once it is in error.
std::string error_of(const std::string& name, const std::string& command,
                     const std::string& sensor_lines = "") {
  Agent agent(exec_sensor(name, command, "", sensor_lines));
  HttpClient c(agent.port());
  auto d = wait_sensor(c, name, [](const rapidjson::Value& s) { return status_of(s) == "error"; });
  return message_of(d["sensors"][name.c_str()]);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

const rapidjson::Value* metric(const rapidjson::Value& sensor, const std::string& name) {
  for (const auto& m : sensor["metrics"].GetArray())
    if (m["name"].GetString() == name) return &m;
  return nullptr;
}

}  // namespace

TEST_CASE("exec: a prometheus program's metrics in /api/current, /metrics and /api/history") {
  TempDir dir;
  const auto probe = program(dir, "probe.sh", R"(#!/bin/sh
# HELP is optional; TYPE decides the kind.
cat <<'EOF'
# HELP probe_temperature_celsius Board temperature.
# TYPE probe_temperature_celsius gauge
probe_temperature_celsius{sensor="a b"} 41.5
# TYPE probe_reads_total counter
probe_reads_total 12 1395066363000
probe_free_bytes 4096
EOF
)");
  Agent agent(exec_sensor("probe", probe));
  HttpClient c(agent.port());
  auto d = wait_sensor(c, "probe", [](const rapidjson::Value& s) { return status_of(s) == "ok"; });
  const auto& s = d["sensors"]["probe"];
  CHECK(s["plugin"].GetString() == std::string("exec"));
  const auto* temp = metric(s, "probe_temperature_celsius");
  REQUIRE(temp);
  CHECK((*temp)["value"].GetDouble() == 41.5);
  CHECK((*temp)["unit"].GetString() == std::string("celsius"));
  CHECK((*temp)["labels"]["sensor"].GetString() == std::string("a b"));
  CHECK_FALSE(temp->HasMember("kind"));
  const auto* reads = metric(s, "probe_reads_total");
  REQUIRE(reads);
  CHECK((*reads)["value"].GetDouble() == 12);
  CHECK((*reads)["kind"].GetString() == std::string("counter"));
  const auto* free = metric(s, "probe_free_bytes");
  REQUIRE(free);
  CHECK((*free)["unit"].GetString() == std::string("bytes"));

  // /metrics puts every sensor metric under the agent's kiwi_ prefix (handlers/metrics).
  const auto prom = c.get("/metrics").body;
  CHECK_THAT(prom, Catch::Contains("kiwi_probe_temperature_celsius{sensor=\"a b\"} 41.5"));
  CHECK_THAT(prom, Catch::Contains("# TYPE kiwi_probe_reads_total counter"));
  CHECK_THAT(prom, Catch::Contains("\nkiwi_probe_reads_total 12\n"));

  auto h = parse_json(c.get("/api/history?limit=5&series=probe_*").body);
  REQUIRE(h["series"].HasMember("probe_temperature_celsius{sensor=\"a b\"}"));
  const auto& series = h["series"]["probe_temperature_celsius{sensor=\"a b\"}"];
  CHECK(series["unit"].GetString() == std::string("celsius"));
  CHECK(series["values"][series["values"].Size() - 1].GetDouble() == 41.5);
}

TEST_CASE(
    "exec: a real exporter's histograms and summaries stay histograms and summaries, promtool "
    "clean") {
  // Prometheus 2.42's own /metrics (tests/fixtures/README.md): 5 histograms, 8 summaries. They
  // were flattened into counters (kiwi_..._bucket_total), which histogram_quantile() cannot read
  // and promtool linted 86 times.
  const std::string fixture = KIWI_FIXTURES_DIR "/exporters/prometheus-2.42.metrics";
  const std::string original = read_text(fixture);
  TempDir dir;
  const auto relay = program(dir, "relay.sh", "#!/bin/sh\nexec cat '" + fixture + "'\n");
  Agent agent(exec_sensor("prom", relay));
  HttpClient c(agent.port());
  auto d = wait_sensor(c, "prom", [](const rapidjson::Value& s) { return status_of(s) == "ok"; });
  CHECK(message_of(d["sensors"]["prom"]) == "");
  const auto bucket =
      metric(d["sensors"]["prom"], "prometheus_tsdb_compaction_chunk_range_seconds_bucket");
  REQUIRE(bucket);
  CHECK((*bucket)["kind"].GetString() == std::string("histogram"));
  const auto quantile = metric(d["sensors"]["prom"], "go_gc_duration_seconds");
  REQUIRE(quantile);
  CHECK((*quantile)["kind"].GetString() == std::string("summary"));

  const auto prom = c.get("/metrics").body;
  const auto file = dir.path / "metrics.txt";
  write_text(file, prom);
  auto [code, out] = run_shell("promtool check metrics < " + file.string() + " 2>&1");
  INFO(out);
  CHECK(code == 0);
  CHECK(out.empty());
  CHECK_THAT(prom, !Catch::Contains("_bucket_total"));
  // The exporter's HELP lines are kept (they were a generic "... from sensor plugin exec").
  CHECK_THAT(prom, Catch::Contains("# HELP kiwi_go_gc_duration_seconds A summary of the pause "
                                   "duration of garbage collection cycles.\n"));
  CHECK_THAT(prom, !Catch::Contains("from sensor plugin exec"));
  // Every histogram and summary of the exporter is one under the prefix, with all its series.
  std::size_t families = 0;
  for (const auto& line : lines_of(original)) {
    if (!line.starts_with("# TYPE ") ||
        !(line.ends_with(" histogram") || line.ends_with(" summary")))
      continue;
    ++families;
    CHECK_THAT(prom, Catch::Contains("# TYPE kiwi_" + line.substr(7) + "\n"));
    const std::string family = line.substr(7, line.find(' ', 7) - 7);
    auto count = [&](const std::string& text, const std::string& prefix) {
      std::size_t n = 0;
      for (const auto& l : lines_of(text))
        if ((l.starts_with(prefix + "_bucket") || l.starts_with(prefix + "_sum") ||
             l.starts_with(prefix + "_count") || l.starts_with(prefix + "{")) &&
            !l.ends_with(" NaN"))  // a quantile of no observations: left out (README)
          ++n;
      return n;
    };
    CHECK(count(prom, "kiwi_" + family) == count(original, family));
  }
  CHECK(families == 13);
}

TEST_CASE("exec: a json program in Python, and the env option") {
  if (std::system("command -v /usr/bin/python3 >/dev/null 2>&1") != 0)
    skip_test("python3 is not installed (tools/setup.sh --test installs it)");
  TempDir dir;
  const auto probe = program(dir, "probe.py", R"(#!/usr/bin/env python3
import json, os
print(json.dumps([
    {"name": "probe_level", "value": float(os.environ["PROBE_LEVEL"]), "unit": ""},
    {"name": "probe_packets_total", "labels": {"port": "eth0"}, "value": 7, "unit": "",
     "kind": "counter"},
    {"name": "probe_uptime_seconds", "value": 3.5, "unit": "seconds"},
]))
)");
  Agent agent(exec_sensor("py", probe, "format = \"json\"\nenv = [\"PROBE_LEVEL=7.25\"]"));
  HttpClient c(agent.port());
  auto d = wait_sensor(c, "py", [](const rapidjson::Value& s) { return status_of(s) == "ok"; });
  const auto& s = d["sensors"]["py"];
  REQUIRE(metric(s, "probe_level"));
  CHECK((*metric(s, "probe_level"))["value"].GetDouble() == 7.25);
  const auto* packets = metric(s, "probe_packets_total");
  REQUIRE(packets);
  CHECK((*packets)["kind"].GetString() == std::string("counter"));
  CHECK((*packets)["labels"]["port"].GetString() == std::string("eth0"));
  CHECK((*metric(s, "probe_uptime_seconds"))["unit"].GetString() == std::string("seconds"));
  CHECK_THAT(c.get("/metrics").body, Catch::Contains("kiwi_probe_packets_total{port=\"eth0\"} 7"));
}

TEST_CASE("exec: the program's environment is scrubbed to the safe set, KIWI_* and env") {
  TempDir dir;
  const auto probe = program(dir, "env.sh", R"SH(#!/bin/sh
[ -n "$SECRET" ] && seen=1 || seen=0
echo "probe_secret_seen $seen"
echo "probe_env{path=\"$PATH\",lang=\"$LANG\",procfs=\"$KIWI_PROCFS\",sysfs=\"$KIWI_SYSFS\",sensor=\"$KIWI_SENSOR\",extra=\"$EXTRA\"} 1"
echo "probe_vars $(env | wc -l)"
)SH");
  ::setenv("SECRET", "x", 1);
  ::unsetenv("TZ");
  Agent agent(exec_sensor("envy", probe, "env = [\"EXTRA=two words\"]"));
  ::unsetenv("SECRET");
  HttpClient c(agent.port());
  auto d = wait_sensor(c, "envy", [](const rapidjson::Value& s) { return status_of(s) == "ok"; });
  const auto& s = d["sensors"]["envy"];
  REQUIRE(metric(s, "probe_secret_seen"));
  CHECK((*metric(s, "probe_secret_seen"))["value"].GetDouble() == 0);
  const auto& labels = (*metric(s, "probe_env"))["labels"];
  CHECK(labels["path"].GetString() ==
        std::string("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"));
  CHECK(labels["lang"].GetString() == std::string("C.UTF-8"));
  CHECK(labels["procfs"].GetString() == std::string("/proc"));
  CHECK(labels["sysfs"].GetString() == std::string("/sys"));
  CHECK(labels["sensor"].GetString() == std::string("envy"));
  CHECK(labels["extra"].GetString() == std::string("two words"));
  // PATH, LANG, EXTRA, the three KIWI_*, KIWI_RUN (the run's mark) and what sh sets (PWD)
  CHECK((*metric(s, "probe_vars"))["value"].GetDouble() == 8);
}

TEST_CASE("exec: a process the program started in a session of its own does not outlive it") {
  // `setsid` took it out of the program's group, which is killed when the program exits: it was
  // left under init (issue 36, item 7). The agent is a child subreaper, so it comes back to the
  // agent, whose run kills and reaps it.
  TempDir dir;
  const auto pidfile = (dir.path / "escapee.pid").string();
  const auto probe = program(dir, "daemon.sh",
                             R"SH(#!/bin/sh
setsid sh -c 'echo $$ > )SH" + pidfile +
                                 R"SH(.new; mv )SH" + pidfile + ".new " + pidfile +
                                 R"SH(; exec sleep 300' </dev/null >/dev/null 2>&1 &
i=0
while [ ! -s )SH" + pidfile + R"SH( ] && [ $i -lt 200 ]; do sleep 0.01; i=$((i+1)); done
echo probe_started 1
)SH");
  Agent agent(exec_sensor("daemon", probe, "", "interval = \"1m\"\n"));
  HttpClient c(agent.port());
  wait_sensor(c, "daemon", [](const rapidjson::Value& s) { return status_of(s) == "ok"; });
  REQUIRE(std::filesystem::exists(pidfile));
  const pid_t escapee = std::stoi(read_text(pidfile));
  REQUIRE(escapee > 1);
  const bool gone = eventually([&] { return ::kill(escapee, 0) != 0 && errno == ESRCH; }, 5s);
  if (!gone) ::kill(escapee, SIGKILL);  // the test's own leftover: not left running
  if (!gone && !emulator().empty()) skip_test(emulator_limit::no_subreaper);
  CHECK(gone);
  CHECK(::kill(agent.pid(), 0) == 0);
}

TEST_CASE("exec: a program that exits non-zero: its status and the last lines of stderr") {
  TempDir dir;
  const auto p = program(dir, "fail.sh",
                         "#!/bin/sh\necho 'probe_x 1'\necho 'cannot open /dev/i2c-1' >&2\n"
                         "echo 'second line' >&2\nexit 3\n");
  CHECK(error_of("failing", p) ==
        "exited with status 3; stderr: cannot open /dev/i2c-1 | second line");
}

TEST_CASE("exec: a Python failure says why (the traceback's end), a missing command is named") {
  TempDir dir;
  const auto missing = program(dir, "lvm.sh", "#!/bin/sh\nkiwi-no-such-tool --units b\n");
  CHECK_THAT(error_of("lvm", missing),
             Catch::StartsWith("exited with status 127 (a command it runs was not found: "
                               "kiwi-no-such-tool); stderr: "));
  if (std::system("command -v /usr/bin/python3 >/dev/null 2>&1") != 0)
    skip_test("python3 is not installed (tools/setup.sh --test installs it)");
  const auto py = program(dir, "fail.py", "#!/usr/bin/python3\nimport sys\nint('twelve')\n");
  const std::string e = error_of("py", py);
  CHECK_THAT(e, Catch::StartsWith("exited with status 1; stderr: "));
  CHECK_THAT(e, Catch::EndsWith("ValueError: invalid literal for int() with base 10: 'twelve'"));
  CHECK_THAT(e, Catch::Contains("line 3, in <module>"));
}

TEST_CASE("exec: a program killed by a signal") {
  TempDir dir;
  const auto p = program(dir, "crash.sh", "#!/bin/sh\nkill -SEGV $$\n");
  CHECK(error_of("crashing", p) == "killed by signal 11 (SIGSEGV)");
}

TEST_CASE("exec: garbage output is an error naming line and column") {
  TempDir dir;
  const auto p = program(dir, "garbage.sh",
                         "#!/bin/sh\necho 'probe_ok 1'\necho 'probe_bad{x=\"1\" 2'\n"
                         "echo 'this is not it' >&2\n");
  CHECK(error_of("garbage", p) ==
        "output line 2, column 17: expected ',' or '}' after the value of label x; stderr: this "
        "is not it");
}

TEST_CASE("exec: a program that prints more than max_output (1 MiB by default) is killed") {
  TempDir dir;
  const auto p = program(dir, "chatty.sh", "#!/bin/sh\nexec yes probe_x 1\n");
  CHECK(error_of("chatty", p) == "printed more than 1048576 bytes");
  // 2 MB of comment, then a metric: refused at the default, read with max_output = "4MiB".
  const auto big = program(dir, "big.sh",
                           "#!/bin/sh\nhead -c 2000000 /dev/zero | tr '\\0' '#'\n"
                           "printf '\\nprobe_big 1\\n'\n");
  CHECK(error_of("big", big) == "printed more than 1048576 bytes");
  Agent agent(exec_sensor("big", big, "max_output = \"4MiB\""));
  HttpClient c(agent.port());
  auto d = wait_sensor(c, "big", [](const rapidjson::Value& s) { return status_of(s) == "ok"; });
  REQUIRE(metric(d["sensors"]["big"], "probe_big"));
}

TEST_CASE("exec: a program that exits 0 and prints nothing is no data") {
  TempDir dir;
  const auto p = program(dir, "quiet.sh", "#!/bin/sh\necho '# nothing today'\n");
  Agent agent(exec_sensor("quiet", p));
  HttpClient c(agent.port());
  auto d =
      wait_sensor(c, "quiet", [](const rapidjson::Value& s) { return status_of(s) == "no_data"; });
  CHECK(message_of(d["sensors"]["quiet"]) == "the program printed no metrics");
}

TEST_CASE("exec: a program not there yet fails each sample, and the agent starts") {
  TempDir dir;
  const std::string missing = (dir.path / "later.sh").string();
  Agent agent(exec_sensor("later", missing));
  CHECK_THAT(agent.stderr_text(),
             Catch::Contains("sensor later: cannot execute " + missing +
                             " (yet): No such file or directory; each sample fails until it can"));
  HttpClient c(agent.port());
  auto d =
      wait_sensor(c, "later", [](const rapidjson::Value& s) { return status_of(s) == "error"; });
  if (!emulator().empty() &&
      message_of(d["sensors"]["later"]).starts_with("exited with status 127"))
    skip_test(emulator_limit::lost_exec_error);
  CHECK(message_of(d["sensors"]["later"]) ==
        "cannot execute " + missing + ": No such file or directory");
  // Installed later: the next samples read it.
  program(dir, "later.sh", "#!/bin/sh\necho 'probe_late 1'\n");
  wait_sensor(c, "later", [](const rapidjson::Value& s) { return status_of(s) == "ok"; });
}

TEST_CASE("exec: a hang is killed at its timeout with its whole group, and a fast sensor goes on") {
  TempDir dir;
  const auto pids = dir.path / "pids";
  const auto p = program(dir, "hang.sh",
                         "#!/bin/sh\nsleep 100 &\necho $$ $! >> " + pids.string() +
                             "\necho 'stuck on the bus' >&2\nsleep 100\n");
  Agent agent(exec_sensor("hang", p, "", "timeout = \"500ms\"\n") +
              "[[sensor]]\nplugin = \"memory\"\n");
  HttpClient c(agent.port());
  auto d =
      wait_sensor(c, "hang", [](const rapidjson::Value& s) { return status_of(s) == "error"; });
  // The sensor shows the time its call had left when it started, rounded up to 10 ms: the
  // timeout. Under the emulator the host's own code between the call's start and the sensor's
  // reading of the clock is translated as it runs, and may take more than those 10 ms.
  const std::string message = message_of(d["sensors"]["hang"]);
  if (emulator().empty())
    CHECK(message == "timed out after 500ms; stderr: stuck on the bus");
  else
    CHECK_THAT(message,
               Catch::Matches("timed out after (4[5-9]0|500)ms; stderr: stuck on the bus"));
  // The call took about its timeout, less the margin the sensor keeps for itself.
  const double took = d["sensors"]["hang"]["duration_seconds"].GetDouble();
  CHECK(took >= 0.4);
  CHECK(took < 0.5);
  // No process of its group is left: the script and its background sleep.
  std::ifstream in(pids);
  pid_t script = 0, background = 0;
  REQUIRE(in >> script >> background);
  CHECK(process_gone(script));
  CHECK(process_gone(background));

  // The memory sensor is read at every tick all along, hang or not: three ticks on (counted by
  // sequence, not by the clock: a busy machine may skip a second) it has a reading of a tick of
  // its own. A hang that held the ticks up, or kept the memory sensor from its calls, fails the
  // wait.
  const auto first = d["sequence"].GetUint64();
  const auto ts = d["sensors"]["memory"]["timestamp"].GetInt64();
  auto later = wait_current(
      c, "three more ticks with a fresh memory reading", [&](const rapidjson::Document& now) {
        return now["sequence"].GetUint64() >= first + 3 &&
               now["sensors"]["memory"]["timestamp"].GetInt64() == now["timestamp"].GetInt64();
      });
  CHECK(later["sensors"]["memory"]["timestamp"].GetInt64() >= ts + 3);
  CHECK(later["sensors"]["memory"]["status"].GetString() == std::string("ok"));
  CHECK(later["sensors"]["hang"]["status"].GetString() == std::string("error"));
}

TEST_CASE(
    "exec: a program cannot write another sensor's series nor the agent's own, and labels keep "
    "two instances apart") {
  TempDir dir;
  // What the issue's spoofing script printed: the memory sensor's series, the agent's own.
  const auto spoof = program(dir, "spoof.sh", R"(#!/bin/sh
cat <<'EOF'
memory_used_bytes 1
sensor_success{sensor="memory"} 0
build_info{version="evil",abi="0.0"} 1
http_requests_total{route="/fake",status="200"} 99
go_goroutines 7
EOF
)");
  const auto other = program(dir, "other.sh", "#!/bin/sh\necho 'go_goroutines 34'\n");
  Agent agent("[[sensor]]\nplugin = \"memory\"\n" + exec_sensor("spoof", spoof) +
              exec_sensor("twin", other) +
              exec_sensor("labelled", other, "", "labels = { source = \"prometheus\" }\n"));
  HttpClient c(agent.port());
  auto d = wait_current(c, "every exec sensor read", [](const rapidjson::Document& d) {
    const auto& s = d["sensors"];
    return s.HasMember("spoof") && s["spoof"].HasMember("series_refused_total") &&
           s.HasMember("twin") && s["twin"].HasMember("series_refused_total") &&
           s.HasMember("labelled") && status_of(s["labelled"]) == "ok";
  });
  // spoof keeps only its own go_goroutines; twin's copy of it is refused, labelled's is its own.
  const auto& s = d["sensors"]["spoof"];
  CHECK(status_of(s) == "ok");
  REQUIRE(s["metrics"].Size() == 1);
  CHECK(s["metrics"][0]["name"].GetString() == std::string("go_goroutines"));
  CHECK(s["series_refused_total"].GetUint64() % 4 == 0);
  CHECK_THAT(message_of(s), Catch::Contains("memory_used_bytes is sensor memory's series"));
  CHECK_THAT(message_of(s), Catch::Contains("is one of the agent's own metrics"));
  CHECK_THAT(message_of(d["sensors"]["twin"]),
             Catch::Contains("go_goroutines is sensor spoof's series"));
  CHECK(d["sensors"]["twin"]["metrics"].Size() == 0);
  REQUIRE(d["sensors"]["labelled"]["metrics"].Size() == 1);
  const auto& labelled = d["sensors"]["labelled"]["metrics"][0];
  CHECK(labelled["labels"]["source"].GetString() == std::string("prometheus"));
  CHECK_FALSE(d["sensors"]["labelled"].HasMember("series_refused_total"));

  const auto prom = c.get("/metrics").body;
  CHECK_THAT(prom, Catch::Contains("kiwi_sensor_success{sensor=\"memory\"} 1\n"));
  CHECK_THAT(prom, !Catch::Contains("evil"));
  CHECK_THAT(prom, !Catch::Contains("/fake"));
  CHECK_THAT(prom, Catch::Contains("\nkiwi_go_goroutines 7\n"));
  CHECK_THAT(prom, Catch::Contains("\nkiwi_go_goroutines{source=\"prometheus\"} 34\n"));
  CHECK_THAT(prom, !Catch::Contains("kiwi_memory_used_bytes 1\n"));
  CHECK_THAT(prom, Catch::Contains("kiwi_sensor_series_refused_total{sensor=\"spoof\"} "));
  CHECK_THAT(prom, Catch::Contains("# HELP kiwi_build_info kiwi-agent version"));

  // The history has the memory sensor's values alone, never the program's 1 nor an average.
  CHECK(eventually([&] {
    auto h = parse_json(c.get("/api/history?limit=5&series=memory_used_bytes").body);
    if (!h["series"].HasMember("memory_used_bytes")) return false;
    const auto& v = h["series"]["memory_used_bytes"]["values"];
    bool all_real = v.Size() > 0;
    for (const auto& x : v.GetArray()) all_real &= x.IsNull() || x.GetDouble() > 1024 * 1024;
    return all_real;
  }));
  auto health = parse_json(c.get("/api/health").body);
  CHECK(health["status"].GetString() == std::string("degraded"));
  bool said = false;
  for (const auto& r : health["reasons"].GetArray()) {
    const std::string reason = r.GetString();
    said |=
        reason.starts_with("sensor spoof: ") && reason.find("values refused") != std::string::npos;
  }
  CHECK(said);
}

TEST_CASE("exec: bad options stop start-up with exit 2, naming the place and the option") {
  TempDir dir;
  const auto file = (dir.path / "kiwi.toml").string();
  const auto ok = program(dir, "ok.sh", "#!/bin/sh\necho 'probe_x 1'\n");
  const std::pair<std::string, std::string> cases[] = {
      {"command = []",
       "option 'command' is required: the program and its arguments, e.g. command = "
       "[\"/usr/local/bin/probe\", \"--fast\"]"},
      {"command = [\"probe.sh\"]",
       "option 'command': the program must be an absolute path (there is no PATH search and no "
       "shell), not \"probe.sh\""},
      {"command = [\"" + ok + "\"]\nformat = \"xml\"",
       "option 'format': \"xml\" is not one of \"prometheus\", \"json\""},
      {"command = [\"" + ok + "\"]\nenv = [\"NOEQUALS\"]",
       "option 'env': \"NOEQUALS\" is not NAME=value (NAME letters, digits and _)"},
      {"command = [\"" + ok + "\"]\nenv = [\"KIWI_SENSOR=x\"]",
       "option 'env': KIWI_SENSOR is set by the agent (KIWI_PROCFS, KIWI_SYSFS, KIWI_SENSOR)"},
      {"command = [\"" + ok + "\"]\nenv = [\"A=1\", \"A=2\"]", "option 'env': A is given twice"},
  };
  for (const auto& [options, error] : cases) {
    INFO(options);
    write_text(file, "[agent]\nplugin_dir = \"" KIWI_PLUGIN_DIR
                     "\"\n[[sensor]]\nplugin = \"exec\"\nname = \"probe\"\n[sensor.options]\n" +
                         options + "\n");
    auto r = run_agent_command({"--check-config", file});
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(file + ":4:10: "));
    CHECK_THAT(r.err, Catch::Contains("sensor 'probe' refused to start: " + error));
  }
  // A type the option table does not allow is the host's error, at the value.
  write_text(file, "[agent]\nplugin_dir = \"" KIWI_PLUGIN_DIR
                   "\"\n[[sensor]]\nplugin = \"exec\"\n[sensor.options]\ncommand = \"/bin/x\"\n");
  auto r = run_agent_command({"--check-config", file});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains(file + ":6:"));
  // A mode that is not one: the host's error, at the value, listing both.
  write_text(file, "[agent]\nplugin_dir = \"" KIWI_PLUGIN_DIR
                   "\"\n[[sensor]]\nplugin = \"exec\"\n[sensor.options]\ncommand = [\"" +
                       ok + "\"]\nmode = \"forever\"\n");
  r = run_agent_command({"--check-config", file});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains(file + ":7:8: "));
  CHECK_THAT(r.err, Catch::Contains("once") && Catch::Contains("daemon"));
}

namespace {
// A program for mode = "daemon": answers each newline on its stdin with how often it was asked,
// its pid and "# EOF"; says so on stderr; exits 3 after EXIT_AFTER answers when that is set.
const char* kDaemonProgram = R"SH(#!/bin/sh
echo "warming up" >&2
n=0
while read -r line; do
  n=$((n+1))
  echo "probe_asked $n"
  echo "probe_pid $$"
  echo "# EOF"
  if [ -n "$EXIT_AFTER" ] && [ "$n" -ge "$EXIT_AFTER" ]; then echo "bye after $n" >&2; exit 3; fi
done
)SH";

double value_of(const rapidjson::Value& sensor, const std::string& name) {
  const auto* m = metric(sensor, name);
  return m ? (*m)["value"].GetDouble() : -1;
}
}  // namespace

TEST_CASE("exec: daemon mode keeps one program running, asks it each sample, logs its stderr") {
  TempDir dir;
  const auto prog = program(dir, "daemon.sh", kDaemonProgram);
  Agent agent(exec_sensor("d", prog, "mode = \"daemon\""));
  HttpClient c(agent.port());
  auto first = wait_sensor(c, "d", [](const rapidjson::Value& s) {
    return status_of(s) == "ok" && value_of(s, "probe_asked") >= 1;
  });
  const double pid = value_of(first["sensors"]["d"], "probe_pid");
  const double asked = value_of(first["sensors"]["d"], "probe_asked");
  auto later = wait_sensor(
      c, "d", [&](const rapidjson::Value& s) { return value_of(s, "probe_asked") >= asked + 2; });
  CHECK(value_of(later["sensors"]["d"], "probe_pid") == pid);  // the same process, asked again
  CHECK(message_of(later["sensors"]["d"]) == "");
  CHECK(::kill(static_cast<pid_t>(pid), 0) == 0);
  const std::string log = agent.stderr_text();
  CHECK_THAT(log, Catch::Contains("started " + prog + " (pid " + std::to_string(int(pid)) + ")"));
  CHECK_THAT(log, Catch::Contains("stderr: warming up"));
  // Stopping the agent stops the program.
  CHECK(agent.stop() == 0);
  CHECK(eventually([&] { return ::kill(static_cast<pid_t>(pid), 0) != 0; }, 5s));
}

TEST_CASE("exec: a daemon program that exits is restarted with backoff, its exit reported") {
  TempDir dir;
  const auto prog = program(dir, "daemon.sh", kDaemonProgram);
  Agent agent(exec_sensor("d", prog, "mode = \"daemon\"\nenv = [\"EXIT_AFTER=2\"]"));
  HttpClient c(agent.port());
  auto first = wait_sensor(c, "d", [](const rapidjson::Value& s) { return status_of(s) == "ok"; });
  const double pid = value_of(first["sensors"]["d"], "probe_pid");
  // Its second answer still counts; then it is gone, and the next sample says so.
  auto failed =
      wait_sensor(c, "d", [](const rapidjson::Value& s) { return status_of(s) == "error"; });
  CHECK_THAT(message_of(failed["sensors"]["d"]),
             Catch::StartsWith("exited with status 3; stderr: warming up | bye after 2; "
                               "restarting in "));
  // Started again: a new process, asked from 1.
  auto again = wait_sensor(c, "d", [&](const rapidjson::Value& s) {
    return status_of(s) == "ok" && value_of(s, "probe_pid") != pid;
  });
  CHECK(value_of(again["sensors"]["d"], "probe_asked") <= 2);
  CHECK_THAT(agent.stderr_text(), Catch::Contains("restarting in 1s"));
}

TEST_CASE("exec: a daemon program that does not answer in time is stopped and restarted") {
  TempDir dir;
  const auto prog = program(dir, "mute.sh",
                            R"SH(#!/bin/sh
echo $$ > )SH" + (dir.path / "mute.pid").string() +
                                R"SH(
while read -r line; do sleep 30; done
)SH");
  Agent agent(exec_sensor("mute", prog, "mode = \"daemon\"", "timeout = \"300ms\"\n"));
  HttpClient c(agent.port());
  auto d =
      wait_sensor(c, "mute", [](const rapidjson::Value& s) { return status_of(s) == "error"; });
  CHECK_THAT(message_of(d["sensors"]["mute"]),
             Catch::StartsWith("no answer (a line \"# EOF\" after the metrics) within 300ms"));
  REQUIRE(std::filesystem::exists(dir.path / "mute.pid"));
  const pid_t first = std::stoi(read_text(dir.path / "mute.pid"));
  // Stopped with its group (its sleep too), and not left a zombie: its pid is gone.
  CHECK(eventually([&] { return ::kill(first, 0) != 0; }, 5s));
}

// ---------------------------------------------------------------------------------------------
// The NVMe wear recipe (plugins/exec/recipes/nvme-wear.sh) through the real exec plugin. No NVMe
// drive here: an `nvme` earlier in PATH prints what Debian 12's nvme-cli printed for a drive
// (tests/fixtures/exporters/nvme-smart-log.json) or, for another device, what it printed for one
// that is not there, and exits 1.

namespace {

const std::string kRecipe = std::string(KIWI_SOURCE_DIR) + "/plugins/exec/recipes/nvme-wear.sh";
const std::string kExporters = std::string(KIWI_FIXTURES_DIR) + "/exporters/";

// Writes <dir>/bin/nvme: `good` answers for the devices it lists, any other fails. `json_filter`
// is a sed script run over the captured JSON (another nvme-cli version's layout).
std::string nvme_stub(const TempDir& dir, const std::string& good,
                      const std::string& json_filter = "") {
  std::filesystem::create_directories(dir.path / "bin");
  program(dir, "bin/nvme",
          R"SH(#!/bin/sh
[ "$1 $2 $3" = "smart-log -o json" ] || { echo "nvme stub: unexpected arguments: $*" >&2; exit 64; }
case " )SH" + good +
              R"SH( " in
*" $4 "*) sed -e ')SH" +
              json_filter + R"SH(' )SH" + kExporters + R"SH(nvme-smart-log.json ;;
*) sed "s|/dev/nvme1n1|$4|" )SH" +
              kExporters + R"SH(nvme-smart-log-no-device.stderr >&2; exit 1 ;;
esac
)SH");
  return (dir.path / "bin").string();
}

// The agent on a fixture board's procfs and sysfs, with diskio and the recipe as sensor `nvme`.
std::string board_lines(const std::string& board) {
  const std::string root = std::string(KIWI_FIXTURES_DIR) + "/" + board;
  return "procfs = \"" + root + "/proc\"\nsysfs = \"" + root + "/sys\"\n";
}
std::string recipe_sensors(const std::string& stub_bin) {
  return "[[sensor]]\nplugin = \"diskio\"\n" +
         exec_sensor("nvme", kRecipe, "env = [\"PATH=" + stub_bin + ":/usr/bin:/bin\"]");
}

}  // namespace

TEST_CASE("exec recipe nvme-wear: a drive's wear beside diskio's bytes written, one failing") {
  TempDir dir;
  // The x86 fixture has two NVMe drives, nvme0n1 and nvme1n1; the second one fails.
  Agent agent(recipe_sensors(nvme_stub(dir, "/dev/nvme0n1")), "", "", "", board_lines("x86"));
  HttpClient c(agent.port());
  auto d = wait_sensor(c, "nvme", [](const rapidjson::Value& s) { return status_of(s) == "ok"; });
  const auto& s = d["sensors"]["nvme"];
  auto value = [&](const std::string& name, const std::string& device) -> double {
    for (const auto& m : s["metrics"].GetArray())
      if (m["name"].GetString() == name && m.HasMember("labels") &&
          m["labels"]["device"].GetString() == device)
        return m["value"].GetDouble();
    FAIL("no " << name << "{device=\"" << device << "\"}");
    return -1;
  };
  CHECK(value("nvme_smart_log_success", "nvme0n1") == 1);
  CHECK(value("nvme_smart_log_success", "nvme1n1") == 0);
  // "percent_used":3, "avail_spare":100, "spare_thresh":10, "data_units_written":"464403132"
  CHECK(value("nvme_percentage_used_ratio", "nvme0n1") == 0.03);
  CHECK(value("nvme_available_spare_ratio", "nvme0n1") == 1);
  CHECK(value("nvme_available_spare_threshold_ratio", "nvme0n1") == 0.1);
  CHECK(value("nvme_critical_warning", "nvme0n1") == 0);
  CHECK(value("nvme_data_written_bytes_total", "nvme0n1") == 464403132.0 * 512000);
  CHECK(value("nvme_data_read_bytes_total", "nvme0n1") == 228744653.0 * 512000);
  CHECK(value("nvme_media_errors_total", "nvme0n1") == 0);
  CHECK(value("nvme_power_on_seconds_total", "nvme0n1") == 27567.0 * 3600);
  const auto* written = metric(s, "nvme_data_written_bytes_total");
  REQUIRE(written);
  CHECK((*written)["kind"].GetString() == std::string("counter"));
  CHECK((*written)["unit"].GetString() == std::string("bytes"));
  CHECK((*metric(s, "nvme_percentage_used_ratio"))["unit"].GetString() == std::string("ratio"));
  // Nothing of the failing drive but its success flag.
  int failing = 0;
  for (const auto& m : s["metrics"].GetArray())
    failing += m.HasMember("labels") && m["labels"]["device"].GetString() == std::string("nvme1n1");
  CHECK(failing == 1);
  // The same device label as diskio's bytes written since boot, in /metrics too.
  const std::string metrics = c.get("/metrics").body;
  CHECK_THAT(metrics,
             Catch::Contains("kiwi_diskio_written_bytes_total{device=\"nvme0n1\"} ") &&
                 Catch::Contains("kiwi_nvme_percentage_used_ratio{device=\"nvme0n1\"} 0.03") &&
                 Catch::Contains("# HELP kiwi_nvme_percentage_used_ratio the vendor estimate"));
}

TEST_CASE("exec recipe nvme-wear: nvme-cli's later layout, unquoted and spaced, reads the same") {
  TempDir dir;
  // nvme-cli 2.4 on prints the 128-bit counters as numbers; a "key": value with a space too.
  Agent agent(
      recipe_sensors(nvme_stub(dir, "/dev/nvme0n1", "s/\"\\([0-9]*\\)\"/\\1/; s/\":/\": /")), "",
      "", "", board_lines("rk3588"));
  HttpClient c(agent.port());
  auto d = wait_sensor(c, "nvme", [](const rapidjson::Value& s) { return status_of(s) == "ok"; });
  const auto& s = d["sensors"]["nvme"];
  REQUIRE(metric(s, "nvme_data_written_bytes_total"));
  CHECK((*metric(s, "nvme_data_written_bytes_total"))["value"].GetDouble() == 464403132.0 * 512000);
  CHECK((*metric(s, "nvme_percentage_used_ratio"))["value"].GetDouble() == 0.03);
}

TEST_CASE("exec recipe nvme-wear: every drive failing is an error naming each, none is no data") {
  TempDir dir;
  const std::string bin = nvme_stub(dir, "");
  {
    Agent agent(recipe_sensors(bin), "", "", "", board_lines("x86"));
    HttpClient c(agent.port());
    auto d =
        wait_sensor(c, "nvme", [](const rapidjson::Value& s) { return status_of(s) == "error"; });
    CHECK(message_of(d["sensors"]["nvme"]) ==
          "exited with status 1; stderr: nvme-wear: nvme0n1: /dev/nvme0n1: No such file or "
          "directory | nvme-wear: nvme1n1: /dev/nvme1n1: No such file or directory");
  }
  // A Raspberry Pi: no NVMe drive, so nothing to print and nvme is not even asked.
  Agent agent(recipe_sensors(bin), "", "", "", board_lines("rpi4"));
  HttpClient c(agent.port());
  auto d =
      wait_sensor(c, "nvme", [](const rapidjson::Value& s) { return status_of(s) == "no_data"; });
  CHECK(message_of(d["sensors"]["nvme"]) == "the program printed no metrics");
}

TEST_CASE("exec recipe nvme-wear: written to a file by a root timer, read by cat in the sandbox") {
  TempDir dir;
  const std::string bin = nvme_stub(dir, "/dev/nvme0n1");
  const std::string file = (dir.path / "nvme-wear.prom").string();
  const auto [status, out] = run_shell(
      "env -i PATH=" + bin + ":/usr/bin:/bin KIWI_SYSFS=" + KIWI_FIXTURES_DIR "/x86/sys " +
      kRecipe + " --output " + file);
  CHECK(status == 0);  // one drive of two answered
  CHECK(out == "nvme-wear: nvme1n1: /dev/nvme1n1: No such file or directory\n");
  CHECK_FALSE(std::filesystem::exists(file + ".new"));
  Agent agent(
      "[[sensor]]\nplugin = \"exec\"\nname = \"nvme\"\n[sensor.options]\ncommand = "
      "[\"/bin/cat\", \"" +
      file + "\"]\n");
  HttpClient c(agent.port());
  auto d = wait_sensor(c, "nvme", [](const rapidjson::Value& s) { return status_of(s) == "ok"; });
  REQUIRE(metric(d["sensors"]["nvme"], "nvme_percentage_used_ratio"));
  CHECK((*metric(d["sensors"]["nvme"], "nvme_percentage_used_ratio"))["value"].GetDouble() == 0.03);
  REQUIRE(metric(d["sensors"]["nvme"], "nvme_smart_log_timestamp_seconds"));
}
