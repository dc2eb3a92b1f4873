// The loader on real shared objects: the built plugins and the deliberately broken test plugins.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <kiwi/json.hpp>

#include "collect/collector.hpp"
#include "config/options.hpp"
#include "emulator.hpp"
#include "notice_support.hpp"
#include "options_support.hpp"
#include "plugin/metric_check.hpp"
#include "plugin/plugin_loader.hpp"
#include "test_support.hpp"

using namespace kiwi::agent;

namespace {
struct NullLogger final : kiwi::Logger {
  void log(kiwi::LogLevel, std::string_view m) override { lines.emplace_back(m); }
  std::vector<std::string> lines;
};

PluginEntry entry(std::string plugin, std::string options_toml = "") {
  PluginEntry e;
  e.plugin = std::move(plugin);
  e.name = "s";
  e.pos = e.plugin_pos = {"kiwi.toml", 3, 10};
  if (!options_toml.empty()) {
    e.options = kiwi::test::options_table(options_toml);
  }
  return e;
}

// A sensor slot for the collector: `plugin` on the rk3588 fixture tree, read every `every` ticks.
SensorSpec fixture_sensor(PluginLoader& loader, const std::string& plugin, std::int64_t every = 1) {
  SensorSpec slot;
  slot.instance = loader.create_sensor(entry(plugin), KIWI_FIXTURES_DIR "/rk3588/proc",
                                       KIWI_FIXTURES_DIR "/rk3588/sys");
  slot.name = slot.plugin = std::string(slot.instance.library->info->name);
  slot.every_ticks = every;
  return slot;
}

// What a collector test needs around the collector: a loader, a store in a temporary directory
// (removed at the end) and the snapshot holder. Members are destroyed in reverse order, so the
// store closes before its directory goes.
struct CollectorRig {
  NullLogger log;
  PluginLoader loader{KIWI_PLUGIN_DIR, log};
  kiwi_test::TempDir dir;
  Store store{(dir.path / "kiwi.db").string()};
  SnapshotHolder holder;
};

std::string error_of(PluginLoader& loader, const PluginEntry& e) {
  try {
    loader.create_sensor(e, KIWI_FIXTURES_DIR "/rk3588/proc", KIWI_FIXTURES_DIR "/rk3588/sys");
  } catch (const std::exception& ex) {
    return ex.what();
  }
  return "";
}

const std::string kTestPlugins = KIWI_TEST_PLUGIN_DIR;
}  // namespace

TEST_CASE("loader: a plugin_dir of one's own adds to the agent's plugins, first, not instead") {
  NullLogger log;
  kiwi_test::TempDir mine;
  std::filesystem::copy_file(kTestPlugins + "/test-slow_sensor.so",
                             mine.path / "kiwi-sensor-slow.so");
  // The agent's own "memory" is found after plugin_dir; "slow" in plugin_dir.
  PluginLoader loader(mine.path.string(), log, {}, nullptr, KIWI_PLUGIN_DIR);
  auto memory = loader.create_sensor(entry("memory"), KIWI_FIXTURES_DIR "/rk3588/proc",
                                     KIWI_FIXTURES_DIR "/rk3588/sys");
  CHECK(memory.library->file ==
        std::filesystem::path(KIWI_PLUGIN_DIR "/kiwi-sensor-memory.so").lexically_normal());
  auto slow = loader.create_sensor(entry("slow"), "/proc", "/sys");
  CHECK(slow.library->file == (mine.path / "kiwi-sensor-slow.so").string());
  // One in plugin_dir wins over the agent's own of the same name.
  std::filesystem::copy_file(kTestPlugins + "/test-slow_sensor.so",
                             mine.path / "kiwi-sensor-thermal.so");
  CHECK(loader.create_sensor(entry("thermal"), "/proc", "/sys").library->info->name == "slow");
  // Neither has it: the message names both places.
  CHECK_THAT(error_of(loader, entry("nosuch")),
             Catch::Contains("plugin file not found (looked up 'nosuch' in plugin_dir " +
                             mine.path.string() + " and then in " KIWI_PLUGIN_DIR ")"));
  // Without the agent's directory, plugin_dir alone is searched.
  PluginLoader alone(mine.path.string(), log);
  CHECK_THAT(error_of(alone, entry("memory")),
             Catch::Contains("(looked up 'memory' in plugin_dir " + mine.path.string() + ")"));
}

TEST_CASE("loader: a plugin named without a path is looked up in plugin_dir") {
  NullLogger log;
  PluginLoader loader(KIWI_PLUGIN_DIR, log);
  CHECK(loader.resolve(kiwi::PluginKind::sensor, "cpu") == KIWI_PLUGIN_DIR "/kiwi-sensor-cpu.so");
  CHECK(loader.resolve(kiwi::PluginKind::handler, "history") == KIWI_PLUGIN_DIR
        "/kiwi-handler-history.so");
  CHECK(loader.resolve(kiwi::PluginKind::sensor, "./x.so") == "./x.so");
  auto inst = loader.create_sensor(entry("memory"), KIWI_FIXTURES_DIR "/rk3588/proc",
                                   KIWI_FIXTURES_DIR "/rk3588/sys");
  CHECK(inst.library->info->name == "memory");
  CHECK(inst.library->abi_major == KIWI_ABI_MAJOR);
  CHECK(inst.library->abi_minor == KIWI_ABI_MINOR);
}

TEST_CASE("loader: each refusal names the file and the reason") {
  NullLogger log;
  PluginLoader loader(KIWI_PLUGIN_DIR, log);
  SECTION("missing file") {
    CHECK(error_of(loader, entry("nosuch")) == "kiwi.toml:3:10: " KIWI_PLUGIN_DIR
                                               "/kiwi-sensor-nosuch.so: plugin file not found "
                                               "(looked up 'nosuch' in plugin_dir " KIWI_PLUGIN_DIR
                                               ")");
  }
  SECTION("a file that is not a shared object") {
    CHECK_THAT(error_of(loader, entry(KIWI_SOURCE_DIR "/config/kiwi-agent.toml.so")),
               Catch::Contains("plugin file not found"));
    CHECK(error_of(loader, entry(KIWI_SOURCE_DIR "/config/kiwi-agent.toml")) ==
          "kiwi.toml:3:10: " KIWI_SOURCE_DIR
          "/config/kiwi-agent.toml: not a shared object (no ELF header)");
  }
  SECTION("a shared object that is not a kiwi plugin") {
    CHECK(error_of(loader, entry(kTestPlugins + "/test-not_kiwi.so")) ==
          "kiwi.toml:3:10: " + kTestPlugins +
              "/test-not_kiwi.so: not a kiwi plugin (no kiwi_plugin_v1 symbol; use "
              "KIWI_SENSOR_PLUGIN or KIWI_HANDLER_PLUGIN, or export it from C as kiwi/plugin.h "
              "says)");
  }
  SECTION("another major version of the C ABI") {
    CHECK(error_of(loader, entry(kTestPlugins + "/test-wrong_abi.so")) ==
          "kiwi.toml:3:10: " + kTestPlugins + "/test-wrong_abi.so: plugin built for ABI " +
              std::to_string(KIWI_ABI_MAJOR + 1) + ".0; this agent loads ABI " +
              std::to_string(KIWI_ABI_MAJOR) + ".x; rebuild the plugin against this agent's SDK");
  }
  SECTION("a plugin of the C++ ABI of kiwi-agent 0.2") {
    CHECK(error_of(loader, entry(kTestPlugins + "/test-old_abi.so")) ==
          "kiwi.toml:3:10: " + kTestPlugins +
              "/test-old_abi.so: built for the C++ plugin ABI of kiwi-agent 0.2 and earlier (it "
              "exports kiwi_abi_version); rebuild it against this agent's SDK, which loads C ABI " +
              std::to_string(KIWI_ABI_MAJOR) + ".x");
  }
  SECTION("a factory that throws") {
    CHECK(
        error_of(loader, entry(kTestPlugins + "/test-throwing_factory.so")) ==
        "kiwi.toml:3:10: " + kTestPlugins +
            "/test-throwing_factory.so: sensor 's' refused to start: device /dev/i2c-1 not found");
  }
  SECTION("a handler plugin used as a sensor") {
    CHECK_THAT(error_of(loader, entry(KIWI_PLUGIN_DIR "/kiwi-handler-current.so")),
               Catch::Contains("is a handler plugin, not a sensor plugin"));
  }
}

TEST_CASE("loader: options are checked against the plugin's table and defaults filled in") {
  NullLogger log;
  PluginLoader loader(KIWI_PLUGIN_DIR, log);
  auto slow = kTestPlugins + "/test-slow_sensor.so";
  CHECK(loader.create_sensor(entry(slow), "/proc", "/sys").options.get_int("sleep_ms") == 0);
  CHECK(loader.create_sensor(entry(slow, "[options]\nsleep_ms = 5\n"), "/proc", "/sys")
            .options.get_int("sleep_ms") == 5);
  CHECK(error_of(loader, entry(slow, "[options]\nsleep_ms = \"5\"\n")) ==
        "kiwi.toml:2:12: sensor.options.sleep_ms: expected an integer");
  CHECK(error_of(loader, entry(slow, "[options]\nsleepms = 5\n")) ==
        "kiwi.toml:2:1: sensor.options.sleepms: unknown option for plugin slow; accepted: "
        "sleep_ms, first_only, fail_after");
}

namespace {
// A handler's option table with the typed kinds, as a plugin declares it.
constexpr kiwi::OptionSpec kTypedOptions[] = {
    {"timeout", kiwi::OptionType::duration, "\"10s\"", "how long a program may run"},
    {"max_output", kiwi::OptionType::size, "\"1MiB\"", "stdout bytes at most"},
    {"max_input", kiwi::OptionType::size, "4096", "stdin bytes at most"},
};
const kiwi::PluginInfo kTypedInfo{kiwi::PluginKind::handler, "typed", "typed options",
                                  kTypedOptions, kiwi::no_metrics};

// validate_options on `toml` (the body of an [options] table at line 2); the error text if it
// throws.
std::string typed_error(const std::string& toml) {
  try {
    validate_options(kTypedInfo, kiwi::test::options_table("[options]\n" + toml), "kiwi.toml",
                     "route");
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}
kiwi::Options typed(const std::string& toml) {
  return validate_options(kTypedInfo, kiwi::test::options_table("[options]\n" + toml), "kiwi.toml",
                          "route");
}
}  // namespace

TEST_CASE("loader: duration and size options are parsed by the host, defaults included") {
  using namespace std::chrono_literals;
  auto defaults = typed("");
  CHECK(defaults.get_duration("timeout") == 10s);
  CHECK(defaults.get_size("max_output") == 1'048'576u);
  CHECK(defaults.get_size("max_input") == 4096u);

  auto given = typed("timeout = \"1m30s\"\nmax_output = \"64KiB\"\nmax_input = 10\n");
  CHECK(given.get_duration("timeout") == 90s);
  CHECK(given.get_size("max_output") == 65'536u);
  CHECK(given.get_size("max_input") == 10u);
  CHECK(typed("max_output = \"10MB\"").get_size("max_output") == 10'000'000u);
  CHECK(typed("max_output = \"512\"").get_size("max_output") == 512u);

  // Read with another type: a programming error of the plugin.
  CHECK_THROWS_AS(given.get_int("timeout"), std::logic_error);
  CHECK_THROWS_AS(given.get_duration("max_output"), std::logic_error);
}

TEST_CASE("loader: a bad duration or size names file:line:col and what it got") {
  const std::string duration_help =
      "expected a duration as a string, e.g. \"500ms\", \"10s\", \"2m\", \"1h30m\"";
  const std::string size_help =
      "expected a size in bytes: an integer, or a string with a unit, e.g. \"512\", \"64KiB\", "
      "\"1MiB\", \"10MB\"";
  CHECK(typed_error("timeout = \"10 s\"") ==
        "kiwi.toml:2:11: route.options.timeout: " + duration_help + ", not \"10 s\"");
  CHECK(typed_error("timeout = 10") == "kiwi.toml:2:11: route.options.timeout: " + duration_help);
  CHECK(typed_error("timeout = \"-1s\"") ==
        "kiwi.toml:2:11: route.options.timeout: " + duration_help + ", not \"-1s\"");
  CHECK(typed_error("max_output = \"1mb\"") ==
        "kiwi.toml:2:14: route.options.max_output: " + size_help + ", not \"1mb\"");
  CHECK(typed_error("max_output = -1") == "kiwi.toml:2:14: route.options.max_output: " + size_help);
  CHECK(typed_error("max_output = 1.5") ==
        "kiwi.toml:2:14: route.options.max_output: " + size_help);
  CHECK(typed_error("max_output = true") ==
        "kiwi.toml:2:14: route.options.max_output: " + size_help);
}

TEST_CASE("options: an invalid typed default is the plugin's error, named") {
  constexpr kiwi::OptionSpec bad[] = {
      {"timeout", kiwi::OptionType::duration, "\"10\"", "a duration without a unit"}};
  const kiwi::PluginInfo info{kiwi::PluginKind::handler, "bad", "", bad, kiwi::no_metrics};
  try {
    validate_options(info, nullptr, "kiwi.toml", "route");
    FAIL("no error");
  } catch (const kiwi::agent::InvalidDefault& e) {  // the loader's PluginError (exit 2)
    CHECK(std::string(e.what()) == "plugin bad: option 'timeout' has an invalid default '\"10\"'");
  }
}

TEST_CASE("loader: --describe-plugin names the duration and size types with their defaults") {
  LoadedLibrary lib;
  lib.info = &kTypedInfo;
  lib.file = "/x/kiwi-handler-typed.so";
  lib.abi_major = 1;
  const std::string text = describe_plugin(lib);
  CHECK_THAT(text, Catch::Contains("    timeout (duration, default \"10s\")\n"
                                   "      how long a program may run\n"));
  CHECK_THAT(text, Catch::Contains("    max_output (size, default \"1MiB\")\n"));
  CHECK_THAT(text, Catch::Contains("    max_input (size, default 4096)\n"));
}

TEST_CASE("loader: a sensor's destructor may log: its logger outlives it (issue 11, item 3)") {
  NullLogger log;
  {
    PluginLoader loader(KIWI_PLUGIN_DIR, log);
    auto inst = loader.create_sensor(
        entry(kTestPlugins + "/test-logs_on_destroy.so", "[options]\nfarewell = \"bye now\"\n"),
        "/proc", "/sys");
    // Moved twice, as the agent moves instances into slots and vectors.
    auto moved = std::move(inst);
    kiwi::agent::PluginInstance<kiwi::Sensor> assigned;
    assigned = std::move(moved);
    REQUIRE(assigned.object);
    CHECK(log.lines.empty());
  }  // the ASan build (tools/test.sh) reports a use-after-free here if the logger went first
  REQUIRE(log.lines.size() == 1);
  CHECK(log.lines[0] == "sensor s: destroyed: bye now");
}

TEST_CASE("collector: a sensor that throws is reported as error, the others go on") {
  CollectorRig rig;
  auto& [log, loader, dir, store, holder] = rig;
  {
    std::vector<SensorSpec> slots;
    slots.push_back(fixture_sensor(loader, kTestPlugins + "/test-throwing_sensor.so"));
    slots.push_back(fixture_sensor(loader, "memory"));
    Collector collector({}, std::move(slots), store, holder, log);
    collector.tick_now();
    collector.tick_now();
    auto snap = holder.current();
    CHECK(snap->sequence == 2);
    REQUIRE(snap->sensors.size() == 2);
    CHECK(snap->sensors[0].state == kiwi::SensorState::error);
    CHECK(snap->sensors[0].message == "read /sys/bus/i2c/devices/1-0048/temp: Input/output error");
    CHECK(snap->sensors[0].metrics.empty());  // the half-written reading is dropped
    CHECK(snap->sensors[1].state == kiwi::SensorState::ok);
    CHECK_FALSE(snap->sensors[1].metrics.empty());
    CHECK_THAT(kiwi::render_snapshot_json(*snap),
               Catch::Contains("\"throws\":{\"plugin\":\"throws\",\"status\":\"error\","
                               "\"message\":\"read /sys/bus/i2c/devices/1-0048/temp: "
                               "Input/output error\""));
    // Logged once when it starts failing, not every tick.
    CHECK(std::count_if(log.lines.begin(), log.lines.end(), [](auto& l) {
            return l.find("sensor throws failed") != std::string::npos;
          }) == 1);
    CHECK(store.query({}).timestamps.size() == 2);
  }
}

TEST_CASE("collector: a sensor with a longer interval shows its last reading until the next") {
  CollectorRig rig;
  auto& [log, loader, dir, store, holder] = rig;
  {
    std::vector<SensorSpec> slots;
    slots.push_back(fixture_sensor(loader, "memory"));
    slots.push_back(fixture_sensor(loader, "cpu", 3));
    Collector collector({}, std::move(slots), store, holder, log);
    std::vector<std::shared_ptr<const kiwi::Snapshot>> snaps;
    for (int i = 0; i < 4; ++i) {
      collector.tick(i);
      snaps.push_back(holder.current());
    }
    for (auto& s : snaps) {
      REQUIRE(s->sensors.size() == 2);
      CHECK(s->sensors[0].name == "memory");
      CHECK(s->sensors[0].timestamp == s->timestamp);  // read every tick
      CHECK(s->sensors[1].name == "cpu");
      CHECK(s->sensors[1].plugin == "cpu");
      CHECK(s->sensors[1].state == kiwi::SensorState::ok);
      CHECK_FALSE(s->sensors[1].metrics.empty());
    }
    // Read on tick 0, shown as it was on ticks 1 and 2, read again on tick 3.
    CHECK(snaps[1]->sensors[1].timestamp == snaps[0]->timestamp);
    CHECK(snaps[2]->sensors[1].timestamp == snaps[0]->timestamp);
    CHECK(snaps[2]->sensors[1].metrics.size() == snaps[0]->sensors[1].metrics.size());
    CHECK(snaps[3]->sensors[1].timestamp == snaps[3]->timestamp);
    // Earlier snapshots keep what they showed (a reader may still hold one).
    CHECK(snaps[0]->sensors[0].metrics.size() == snaps[3]->sensors[0].metrics.size());
  }
}

TEST_CASE(
    "loader: a file name is looked up in plugin_dir, a missing plugin_dir is named where set") {
  NullLogger log;
  PluginLoader loader(KIWI_PLUGIN_DIR, log);
  CHECK(loader.resolve(kiwi::PluginKind::sensor, "kiwi-sensor-cpu.so") == KIWI_PLUGIN_DIR
        "/kiwi-sensor-cpu.so");
  CHECK(loader.create_sensor(entry("kiwi-sensor-memory.so"), "/proc", "/sys").library->info->name ==
        "memory");

  PluginLoader nowhere("/nonexistent/plugins", log, {"my.toml", 2, 14});
  CHECK(error_of(nowhere, entry("cpu")) ==
        "my.toml:2:14: agent.plugin_dir: \"/nonexistent/plugins\" is not a directory, so no plugin "
        "can be found there (sensor 'cpu' at kiwi.toml:3:10 needs "
        "/nonexistent/plugins/kiwi-sensor-cpu.so)");
}

TEST_CASE("collector: every sample sits on the interval grid, strictly later than the one before") {
  CollectorRig rig;
  auto& [log, loader, dir, store, holder] = rig;
  std::vector<SensorSpec> slots;
  slots.push_back(fixture_sensor(loader, "memory"));
  CollectorSettings settings;
  settings.interval = Millis(2000);
  Collector collector(settings, std::move(slots), store, holder, log);
  // Three samples within one interval (as at start-up, late in a second): three grid points.
  collector.tick_now();
  const double first = holder.current()->timestamp;
  collector.tick_now();
  collector.tick_now();
  const double third = holder.current()->timestamp;
  CHECK(std::fmod(first, 2.0) == 0);
  CHECK(third == first + 4);
  // A tick number already taken (the wall clock went back) becomes the next one.
  collector.tick(5);
  CHECK(holder.current()->timestamp == third + 2);
  auto h = store.query({});
  REQUIRE(h.timestamps.size() == 4);
  for (std::size_t i = 1; i < h.timestamps.size(); ++i)
    CHECK(h.timestamps[i] == h.timestamps[i - 1] + 2);
}

TEST_CASE("tests: a test that cannot run is skipped under ctest and fails by hand, never passes") {
  // This binary, on the hidden probe below: exit 77 (ctest's SKIP_RETURN_CODE) with KIWI_CTEST.
  // Its path is read from /proc/self/exe (under qemu-user, /proc/<pid>/exe is the emulator).
  const std::string self = kiwi_test::emulated_shell_prefix() + "'" +
                           std::filesystem::read_symlink("/proc/self/exe").string() + "'";
  auto run = [&self](const std::string& env) {
    return std::system((env + " " + self + " '[.skip-probe]' > /dev/null 2>&1").c_str());
  };
  int under_ctest = run("KIWI_CTEST=1");
  REQUIRE(WIFEXITED(under_ctest));
  CHECK(WEXITSTATUS(under_ctest) == 77);
  int by_hand = run("env -u KIWI_CTEST");
  REQUIRE(WIFEXITED(by_hand));
  CHECK(WEXITSTATUS(by_hand) != 0);
  CHECK(WEXITSTATUS(by_hand) != 77);
}

TEST_CASE("skip probe: always cannot run", "[.skip-probe]") {
  kiwi_test::skip_test("a probe for the skip mechanism");
}

TEST_CASE(
    "README: the plugin example is examples/uptime-sensor/uptime.cpp, which builds, loads and "
    "samples") {
  std::ifstream readme(KIWI_SOURCE_DIR "/README.md"),
      example(KIWI_SOURCE_DIR "/examples/uptime-sensor/uptime.cpp");
  std::stringstream r, e;
  r << readme.rdbuf();
  e << example.rdbuf();
  REQUIRE_FALSE(e.str().empty());
  CHECK_THAT(r.str(), Catch::Contains("```cpp\n" + e.str() + "```\n"));

  NullLogger log;
  PluginLoader loader(KIWI_PLUGIN_DIR, log);
  auto inst =
      loader.create_sensor(entry(kTestPlugins + "/example-uptime.so", "[options]\nscale = 2.0\n"),
                           KIWI_FIXTURES_DIR "/rk3588/proc", KIWI_FIXTURES_DIR "/rk3588/sys");
  std::vector<kiwi::MetricValue> out;
  kiwi::agent::CheckedSink sink(out);
  CHECK(inst.object->sample(sink).status == kiwi::SampleStatus::ok);
  CHECK(sink.finish().empty());
  REQUIRE(out.size() == 1);
  CHECK(out[0].name == "uptime_seconds");
  CHECK(out[0].unit == "seconds");
  CHECK(out[0].value > 0);
}

namespace {
std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Writes `bytes` over the existing file `path`, in place: the inode stays. Not truncated first:
// truncating a file discards even the private (relocated) pages of every mapping of it, so the
// object loaded from it could not even be unloaded any more; `bytes` must not be shorter.
void rewrite_in_place(const std::string& path, const std::string& bytes) {
  struct stat before {};
  REQUIRE(::stat(path.c_str(), &before) == 0);
  REQUIRE(bytes.size() >= static_cast<std::size_t>(before.st_size));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  const bool written =
      ::pwrite(fd, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size());
  ::close(fd);
  REQUIRE(written);
  struct stat after {};
  REQUIRE(::stat(path.c_str(), &after) == 0);
  REQUIRE(after.st_ino == before.st_ino);
}

// Replaces `path` by a new file (a new inode), as `install` or a package manager does.
void replace_by_rename(const std::string& path, const std::string& bytes) {
  {
    std::ofstream out(path + ".new", std::ios::binary);
    out << bytes;
    REQUIRE(out.good());
  }
  REQUIRE(std::rename((path + ".new").c_str(), path.c_str()) == 0);
}

// What one sample of `sensor` emits: the metric names; "failed" if it did not succeed.
std::vector<std::string> sample_names(kiwi::Sensor& sensor) {
  std::vector<kiwi::MetricValue> out;
  kiwi::agent::CheckedSink sink(out);
  if (sensor.sample(sink).status != kiwi::SampleStatus::ok) return {"failed"};
  std::vector<std::string> names;
  for (auto& m : out) names.push_back(m.name);
  return names;
}
}  // namespace

TEST_CASE("loader: a plugin file replaced on disk is loaded anew, an unchanged one is not") {
  kiwi_test::TempDir dir;
  const std::string so = (dir.path / "probe.so").string();
  const std::string uptime = read_bytes(kTestPlugins + "/example-uptime.so");
  std::string slow = read_bytes(kTestPlugins + "/test-slow_sensor.so");
  REQUIRE_FALSE(uptime.empty());
  REQUIRE_FALSE(slow.empty());
  replace_by_rename(so, uptime);
  const auto proc = KIWI_FIXTURES_DIR "/rk3588/proc", sys = KIWI_FIXTURES_DIR "/rk3588/sys";
  const auto kind = kiwi::PluginKind::sensor;

  NullLogger log;
  PluginLoader loader(KIWI_PLUGIN_DIR, log);
  auto first = loader.create_sensor(entry(so), proc, sys);
  REQUIRE(first.library->info->name == "uptime");
  CHECK(first.library->file == so);
  CHECK(first.library->loaded_from == so);  // a first load is a plain dlopen(path)

  // (a) Unchanged: the same library, also for the loader a reload builds beside this one.
  CHECK(loader.open(kind, entry(so)) == first.library);
  PluginLoader reload("/elsewhere", log, {}, loader.cache());
  CHECK(reload.cache() == loader.cache());
  CHECK(reload.open(kind, entry(so)) == first.library);
  {
    // A loader with a cache of its own gets its own LoadedLibrary, but of the same loaded code.
    PluginLoader other(KIWI_PLUGIN_DIR, log);
    CHECK(other.cache() != loader.cache());
    auto lib = other.open(kind, entry(so));
    CHECK(lib != first.library);
    CHECK(lib->descriptor->c == first.library->descriptor->c);  // the same kiwi_plugin_v1()
  }
  CHECK(log.lines.empty());

  // (b) Replaced by another file (a new inode): loaded anew, beside the old one, which still
  // serves the instance holding it.
  replace_by_rename(so, slow);
  auto second = reload.create_sensor(entry(so), proc, sys);
  CHECK(second.library != first.library);
  CHECK(second.library->info->name == "slow");
  CHECK(second.library->file == so);  // shown in /api/plugins: the real path
  CHECK_THAT(second.library->loaded_from, Catch::StartsWith("/proc/self/fd/"));
  CHECK(sample_names(*second.object) == std::vector<std::string>{"slow_samples"});
  CHECK(sample_names(*first.object) == std::vector<std::string>{"uptime_seconds"});
  CHECK(loader.open(kind, entry(so)) == second.library);  // the cache is shared
  REQUIRE(log.lines.size() == 1);
  CHECK_THAT(log.lines[0], Catch::StartsWith(so + ": changed on disk since it was loaded; loaded "
                                                  "anew from /proc/self/fd/"));

  // (c) Rewritten in place (the same inode, which glibc would take for the loaded object): loaded
  // anew from a copy. Writing into a mapped file changes the object mapping it, so the library
  // of `second` is kept loaded but no longer called, and the new file differs from it only in the
  // descriptor's name (so its unloading runs intact code) and in one byte more at the end (the
  // size tells the files apart: their mtimes may fall on one clock tick).
  std::weak_ptr<LoadedLibrary> old_slow = second.library;
  auto held = second.library;
  second = {};
  const std::string name = std::string("\0slow\0", 6);
  REQUIRE(slow.find(name) != std::string::npos);
  REQUIRE(slow.find(name, slow.find(name) + 1) == std::string::npos);
  slow.replace(slow.find(name), name.size(), std::string("\0SLOW\0", 6));
  rewrite_in_place(so, slow + '\0');
  auto third = reload.create_sensor(entry(so), proc, sys);
  CHECK(third.library != held);
  CHECK(third.library->descriptor->c != held->descriptor->c);
  CHECK(third.library->info->name == "SLOW");
  CHECK(third.library->file == so);
  REQUIRE_THAT(third.library->loaded_from, Catch::StartsWith("/proc/self/fd/"));
  CHECK_THAT(std::filesystem::read_symlink(third.library->loaded_from).string(),
             Catch::StartsWith("/memfd:kiwi-plugin:probe.so"));
  CHECK(sample_names(*third.object) == std::vector<std::string>{"slow_samples"});
  CHECK(sample_names(*first.object) == std::vector<std::string>{"uptime_seconds"});
  CHECK(loader.open(kind, entry(so)) == third.library);

  // (d) The cache holds no library alive: once its instances are gone, a library is released,
  // and the next open loads the file again.
  held.reset();
  CHECK(old_slow.expired());
  std::weak_ptr<LoadedLibrary> old_third = third.library;
  third = {};
  CHECK(old_third.expired());
  auto again = loader.create_sensor(entry(so), proc, sys);
  // Only the instance holds it: its PluginInstance and its object's kiwi_host (keep_loaded).
  CHECK(again.library.use_count() == 2);
  CHECK(again.library->info->name == "SLOW");
  CHECK(sample_names(*again.object) == std::vector<std::string>{"slow_samples"});
  std::weak_ptr<LoadedLibrary> old_uptime = first.library;
  first = {};
  CHECK(old_uptime.expired());
  replace_by_rename(so, uptime);
  auto back = loader.create_sensor(entry(so), proc, sys);
  CHECK(back.library->info->name == "uptime");
  CHECK(sample_names(*back.object) == std::vector<std::string>{"uptime_seconds"});
  CHECK(sample_names(*again.object) == std::vector<std::string>{"slow_samples"});

  // (e) An object glibc keeps loaded after its last dlclose() by the loader (here the test holds
  // a reference; in life, STB_GNU_UNIQUE symbols do that): its "/proc/self/fd/N" name, and so fd
  // N, stay taken, and the unchanged file gets that object again. Once it is gone, N is closed.
  const std::string name_n = back.library->loaded_from;
  REQUIRE_THAT(name_n, Catch::StartsWith("/proc/self/fd/"));
  const int n = std::stoi(name_n.substr(14));
  void* pin = ::dlopen(name_n.c_str(), RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(pin);
  back = {};
  CHECK(::fcntl(n, F_GETFD) != -1);
  auto reuse = loader.create_sensor(entry(so), proc, sys);
  CHECK(reuse.library->loaded_from == name_n);
  CHECK(sample_names(*reuse.object) == std::vector<std::string>{"uptime_seconds"});
  ::dlclose(pin);
  CHECK(::fcntl(n, F_GETFD) != -1);  // `reuse` uses it
  reuse = {};
  CHECK(::fcntl(n, F_GETFD) == -1);
}

namespace {
// Samples `inst` once into a CheckedSink; the metrics by name (with labels as name{k=v}).
std::map<std::string, kiwi::MetricValue> sample_once(PluginInstance<kiwi::Sensor>& inst,
                                                     kiwi::SampleResult* result = nullptr) {
  std::vector<kiwi::MetricValue> out;
  CheckedSink sink(out, std::chrono::steady_clock::now() + std::chrono::seconds(2));
  auto r = inst.object->sample(sink);
  if (result) *result = r;
  CHECK(sink.finish().empty());
  std::map<std::string, kiwi::MetricValue> by;
  for (auto& m : out) {
    std::string key = m.name;
    for (auto& [k, v] : m.labels) key += "{" + k + "=" + v + "}";
    by[key] = m;
  }
  return by;
}
}  // namespace

TEST_CASE("C ABI: keep_loaded keeps a plugin's library mapped after its last instance is gone") {
  const std::string file = kTestPlugins + "/test-c_sensor.so";
  auto mapped = [&] {
    void* h = ::dlopen(file.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (h) ::dlclose(h);
    return h != nullptr;
  };
  NullLogger log;
  {
    PluginLoader loader(KIWI_PLUGIN_DIR, log);
    auto inst = loader.create_sensor(entry(file), "/proc", "/sys");
    CHECK(mapped());
  }
  CHECK_FALSE(mapped());  // without it, the last instance gone unloads the library
  {
    PluginLoader loader(KIWI_PLUGIN_DIR, log);
    auto inst =
        loader.create_sensor(entry(file, "[options]\nmode = \"keep_loaded\"\n"), "/proc", "/sys");
  }
  CHECK(mapped());  // a thread it left behind may still return into its code
}

TEST_CASE("C ABI: a sensor written in C gets its options, emits through its table, and logs") {
  NullLogger log;
  PluginLoader loader(KIWI_PLUGIN_DIR, log);
  auto inst = loader.create_sensor(
      entry(kTestPlugins + "/test-c_sensor.so",
            "[options]\nscale = 2.5\ncount = 3\nnames = [\"x\", \"y\", \"z\"]\n"
            "period = \"2m\"\nbuffer = \"1MiB\"\n"),
      "/proc", "/sys");
  REQUIRE(inst.library->info->name == "c_sensor");
  CHECK(inst.library->info->metrics.size() == 7);
  CHECK(inst.library->info->metrics[1].labels == "name");
  CHECK(inst.library->info->metrics[2].kind == kiwi::MetricKind::counter);
  CHECK(inst.library->info->metrics[2].unit == kiwi::Unit::count);
  CHECK(inst.library->info->metrics[2].rate == "c_samples_per_second");  // ABI 1.1's member
  kiwi::SampleResult result;
  auto m = sample_once(inst, &result);
  sample_once(inst);  // the state is the instance's: the second sample counts on
  m = sample_once(inst, &result);
  CHECK(result.status == kiwi::SampleStatus::ok);
  CHECK(result.message == "written in C");
  CHECK(m.at("c_value").value == 7.5);  // scale 2.5, third sample
  CHECK(m.at("c_labelled_ratio{name=z}").value == 0.75);
  CHECK(m.at("c_labelled_ratio{name=x}").unit == "ratio");
  CHECK(m.at("c_samples_total").kind == kiwi::MetricKind::counter);
  CHECK(m.at("c_period_seconds").value == 120);
  CHECK(m.at("c_buffer_bytes").value == 1048576);
  CHECK(m.at("c_adhoc_celsius").unit == "celsius");  // not in the table, made for the occasion
  // The deadline crossed the boundary: about the 2 s the sink was given.
  CHECK(m.at("c_deadline_seconds").value > 1.5);
  CHECK(m.at("c_deadline_seconds").value <= 2.0);
  REQUIRE_FALSE(log.lines.empty());
  CHECK(log.lines.front() == "sensor s: created in mode ok for s");
}

TEST_CASE("C ABI: no_data, an error and a refusal carry the C plugin's own words") {
  NullLogger log;
  PluginLoader loader(KIWI_PLUGIN_DIR, log);
  auto no_data = loader.create_sensor(
      entry(kTestPlugins + "/test-c_sensor.so", "[options]\nmode = \"no_data\"\n"), "/proc",
      "/sys");
  kiwi::SampleResult r;
  sample_once(no_data, &r);
  CHECK(r.status == kiwi::SampleStatus::no_data);
  CHECK(r.message == "nothing to measure in mode no_data");
  auto failing = loader.create_sensor(
      entry(kTestPlugins + "/test-c_sensor.so", "[options]\nmode = \"error\"\n"), "/proc", "/sys");
  std::vector<kiwi::MetricValue> out;
  CheckedSink sink(out);
  CHECK_THROWS_WITH(failing.object->sample(sink), "failing as mode error asks");
  CHECK(error_of(loader,
                 entry(kTestPlugins + "/test-c_sensor.so", "[options]\nmode = \"refuse\"\n")) ==
        "kiwi.toml:3:10: " + kTestPlugins +
            "/test-c_sensor.so: sensor 's' refused to start: mode = \"refuse\": refusing as asked");
}

TEST_CASE("C ABI: an option out of its declared range is the user's error, at file:line:col") {
  NullLogger log;
  PluginLoader loader(KIWI_PLUGIN_DIR, log);
  CHECK(error_of(loader, entry(kTestPlugins + "/test-c_sensor.so", "[options]\ncount = 17\n")) ==
        "kiwi.toml:2:9: sensor.options.count: out of range: 0..16");
  CHECK(error_of(loader, entry(kTestPlugins + "/test-c_sensor.so", "[options]\nscale = -1.0\n")) ==
        "kiwi.toml:2:9: sensor.options.scale: out of range: 0..1000");
}

TEST_CASE("loader: a [[remote_write]]'s options are checked in either shape, named as written") {
  NullLogger log;
  PluginLoader loader(KIWI_PLUGIN_DIR, log);
  auto error_of_output = [&](const std::string& toml) -> std::string {
    const Config cfg = load_config_text(toml, "kiwi.toml", "/x");
    try {
      loader.create_output(cfg.outputs.at(0), "host", "0");
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  };
  CHECK(error_of_output("[[remote_write]]\noptions = { url = \"http://127.0.0.1:9/\" }\n").empty());
  CHECK(error_of_output("[[remote_write]]\nurl = \"http://127.0.0.1:9/\"\n").empty());
  CHECK(error_of_output("[[remote_write]]\noptions = { url = \"http://a/\", compression = 1 }\n") ==
        "kiwi.toml:2:32: remote_write.options.compression: unknown option for plugin "
        "remote_write; accepted: url, timeout, headers, basic_auth, labels");
  CHECK(error_of_output("[[remote_write]]\nurl = \"http://a/\"\ncompression = 1\n") ==
        "kiwi.toml:3:1: remote_write.compression: unknown option for plugin remote_write; "
        "accepted: url, timeout, headers, basic_auth, labels, plugin, name, interval, series, "
        "max_samples");
}

TEST_CASE("C ABI: an option with choices (ABI 1.3) refuses another word, listing them") {
  NullLogger log;
  PluginLoader loader(KIWI_PLUGIN_DIR, log);
  CHECK(error_of(loader,
                 entry(kTestPlugins + "/test-c_sensor.so", "[options]\nmode = \"bogus\"\n")) ==
        "kiwi.toml:2:8: sensor.options.mode: expected one of \"ok\", \"no_data\", \"error\", "
        "\"refuse\" or \"keep_loaded\", not \"bogus\"");
  auto lib = loader.open(kiwi::PluginKind::sensor, entry(kTestPlugins + "/test-c_sensor.so"));
  CHECK(lib->info->options[0].choices == "ok,no_data,error,refuse,keep_loaded");
  CHECK(describe_plugin(*lib).find("mode (\"ok\", \"no_data\", \"error\", \"refuse\" or "
                                   "\"keep_loaded\", default \"ok\")") != std::string::npos);
}

TEST_CASE("C ABI: a plugin of a newer minor version, with larger structs, loads and works") {
  NullLogger log;
  PluginLoader loader(KIWI_PLUGIN_DIR, log);
  auto inst = loader.create_sensor(
      entry(kTestPlugins + "/test-newer_minor.so", "[options]\nfirst = 41\nsecond = \"four\"\n"),
      "/proc", "/sys");
  CHECK(inst.library->abi_minor == KIWI_ABI_MINOR + 7);
  // Both rows of each table were read, stepped through by the plugin's larger row size.
  REQUIRE(inst.library->info->options.size() == 2);
  CHECK(inst.library->info->options[1].key == "second");
  CHECK(inst.library->info->options[1].description == "the second option");
  REQUIRE(inst.library->info->metrics.size() == 2);
  CHECK(inst.library->info->metrics[1].name == "future_second_bytes");
  auto m = sample_once(inst);
  CHECK(m.at("future_first").value == 41);
  CHECK(m.at("future_second_bytes").value == 4);
}

TEST_CASE("C ABI: a plugin of ABI 1.0, whose metric rows have no rate, loads and works") {
  NullLogger log;
  PluginLoader loader(KIWI_PLUGIN_DIR, log);
  auto inst = loader.create_sensor(entry(kTestPlugins + "/test-older_minor.so"), "/proc", "/sys");
  CHECK(inst.library->abi_minor == 0);
  // Option rows of the 1.0 size: stepped through by it, with no `choices` read past the row.
  REQUIRE(inst.library->info->options.size() == 2);
  CHECK(inst.library->info->options[1].key == "limit");
  CHECK(inst.library->info->options[0].choices.empty());
  CHECK(inst.library->info->options[1].choices.empty());
  CHECK(error_of(loader, entry(kTestPlugins + "/test-older_minor.so", "[options]\nlimit = 10\n")) ==
        "kiwi.toml:2:9: sensor.options.limit: out of range: 1..9");
  REQUIRE(inst.library->info->metrics.size() == 2);  // stepped through by the 1.0 row size
  CHECK(inst.library->info->metrics[1].name == "old_value_bytes");
  CHECK(inst.library->info->metrics[0].rate.empty());  // not read past the row
  CHECK(inst.library->info->metrics[1].rate.empty());
  auto m = sample_once(inst);
  CHECK(m.at("old_samples_total").value == 1);
  CHECK(m.at("old_samples_total").kind == kiwi::MetricKind::counter);
  CHECK(m.at("old_value_bytes").value == 512);
  CHECK(m.size() == 2);  // no rate derived from a row that has none
}

TEST_CASE("C ABI: a counter's rate must name a gauge row of the table in its rate unit") {
  using kiwi::MetricSpec;
  using kiwi::Unit;
  const MetricSpec counter =
      kiwi::counter("x_bytes_total", Unit::bytes, "dev", "", "x_bytes_per_second");
  const MetricSpec rate = kiwi::gauge("x_bytes_per_second", Unit::bytes_per_second, "dev", "");
  CHECK_NOTHROW(check_rates({counter, rate}));
  CHECK_THROWS_WITH(check_rates({counter}),
                    "metric x_bytes_total: rate x_bytes_per_second is not a row of the table");
  CHECK_THROWS_WITH(
      check_rates({counter, kiwi::gauge("x_bytes_per_second", Unit::per_second, "dev", "")}),
      "metric x_bytes_total: rate x_bytes_per_second must be a gauge in bytes_per_second with "
      "the labels \"dev\"");
  CHECK_THROWS_WITH(
      check_rates({counter, kiwi::gauge("x_bytes_per_second", Unit::bytes_per_second, "", "")}),
      "metric x_bytes_total: rate x_bytes_per_second must be a gauge in bytes_per_second with "
      "the labels \"dev\"");
  MetricSpec gauge_with_rate = rate;
  gauge_with_rate.rate = "y";
  CHECK_THROWS_WITH(check_rates({gauge_with_rate}),
                    "metric x_bytes_per_second: rate y on a metric that is not a counter");
  CHECK_THROWS_WITH(check_rates({kiwi::counter("t_total", Unit::celsius, "", "", "t_rate"),
                                 kiwi::gauge("t_rate", Unit::per_second, "", "")}),
                    "metric t_total: rate t_rate: a counter in celsius has no per-second rate");
  CHECK_THROWS_WITH(check_rates({kiwi::counter("n_total", Unit::count, "", "", "bad name")}),
                    "metric n_total: rate bad name is not a valid metric name");
}

TEST_CASE(
    "C ABI: a metric row in a unit of a later minor version is refused at load, naming the row, "
    "the code and the plugin's version") {
  // A plugin of the next minor version declaring a unit added after this agent (code 40): its
  // values would be
  // dropped at every sample, so the plugin is refused instead, saying it needs a newer agent.
  static const kiwi_metric_spec rows[] = {
      {{"ok_volts", 8}, KIWI_UNIT_VOLTS, KIWI_GAUGE, {"", 0}, {"", 0}, {"", 0}},
      {{"future_lux", 10}, 40, KIWI_GAUGE, {"", 0}, {"", 0}, {"", 0}}};
  kiwi_plugin p{};
  p.abi_major = KIWI_ABI_MAJOR;
  p.abi_minor = KIWI_ABI_MINOR + 1;
  p.size = sizeof p;
  p.kind = KIWI_KIND_SENSOR;
  p.name = {"future", 6};
  p.metrics = rows;
  p.metric_count = 2;
  p.metric_spec_size = sizeof rows[0];
  p.sensor_create = [](const kiwi_sensor_context*, const kiwi_refusal*) -> void* {
    return nullptr;
  };
  p.sensor_sample = [](void*, const kiwi_sink*) -> std::uint32_t { return KIWI_SAMPLE_OK; };
  p.destroy = [](void*) {};
  const std::string minor = std::to_string(KIWI_ABI_MINOR);
  CHECK_THROWS_WITH(
      Descriptor(&p),
      "metric future_lux: unit code 40 is not one this agent knows (ABI 1." + minor +
          ": bytes, seconds, celsius, hertz, ratio, count, bytes_per_second, per_second, volts, "
          "amperes, watts, rpm or none); the plugin is built for ABI 1." +
          std::to_string(KIWI_ABI_MINOR + 1) + ": it needs a newer agent");
  p.metric_count = 1;  // the 1.5 units are this agent's
  CHECK_NOTHROW(Descriptor(&p));
  // A unit this agent knows is checked at each sample as before; an unknown one in a row a
  // sensor makes at run time (exec's) is dropped there and named in its status.
  CHECK(*check_metric({"future_lux", static_cast<kiwi::Unit>(40), kiwi::MetricKind::gauge, "", ""},
                      {}, 1) ==
        "\"future_lux\": unit code 40 is not a known unit (bytes, seconds, celsius, hertz, ratio, "
        "count, bytes_per_second, per_second, volts, amperes, watts, rpm or none)");
}

namespace {
std::string whole_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("C ABI: a notifier written in C is sent every member of a notification, and answers") {
  NullLogger log;
  PluginLoader loader(KIWI_PLUGIN_DIR, log);
  kiwi_test::TempDir dir;
  const std::string file = (dir.path / "sent.txt").string();
  auto inst = loader.create_notifier(
      entry(kTestPlugins + "/test-c_notifier.so", "[options]\nfile = \"" + file + "\"\n"), "kiwipi",
      "0.3.0");
  CHECK(inst.library->info->kind == kiwi::PluginKind::notifier);
  CHECK(inst.library->abi_minor == KIWI_ABI_MINOR);
  REQUIRE_FALSE(log.lines.empty());
  CHECK(log.lines.front() == "notify s: notifier s on kiwipi, agent 0.3.0");
  kiwi::Notification two = kiwi_notice_test::notification(
      {kiwi_notice_test::soc_hot(), kiwi_notice_test::sensor_failing_resolved()});
  two.alerts[0].labels = {{"type", "cpu"}, {"zone", "soc"}};
  const kiwi::WriteResult r = inst.object->send(two);
  CHECK(r.status == kiwi::WriteStatus::ok);
  CHECK(r.reason.empty());
  CHECK(log.lines.back() == "notify s: sent");
  CHECK(whole_file(file) ==
        "notification repeat=0 host=kiwipi url=http://kiwipi:8095/ alerts=2\n"
        "soc_hot sensor=thermal severity=1 firing=1 summary=soc at 85.2 °C value=85.2 "
        "threshold=80 starts=1700000000.250 ends=1700000300.000 sequence=7 "
        "labels=type=cpu,zone=soc\n"
        "sensor_failing sensor=storage severity=2 firing=0 summary= value=nan threshold=nan "
        "starts=1700000000.000 ends=1700000125.000 sequence=8 labels=\n");

  for (auto [answer, status] :
       {std::pair{"retry", kiwi::WriteStatus::retry}, std::pair{"drop", kiwi::WriteStatus::drop}}) {
    auto other = loader.create_notifier(
        entry(kTestPlugins + "/test-c_notifier.so",
              "[options]\nfile = \"" + file + "\"\nanswer = \"" + answer + "\"\n"),
        "kiwipi", "0.3.0");
    const kiwi::WriteResult verdict = other.object->send(two);
    CHECK(verdict.status == status);
    CHECK(verdict.reason == "answering as the answer option says");
  }
  CHECK_THROWS_WITH(loader.create_notifier(entry(kTestPlugins + "/test-c_notifier.so"), "h", "0"),
                    "kiwi.toml:3:10: " + kTestPlugins +
                        "/test-c_notifier.so: notify 's' refused to start: file is required");
}

TEST_CASE("loader: a [[notify]]'s options are checked in either shape, named as written") {
  NullLogger log;
  PluginLoader loader(KIWI_PLUGIN_DIR, log);
  auto notifier_error = [&](const std::string& toml) -> std::string {
    const Config cfg =
        load_config_text("[[notify]]\nkind = \"" + kTestPlugins + "/test-c_notifier.so\"\n" + toml,
                         "kiwi.toml", "/x");
    try {
      loader.create_notifier(cfg.notifiers.at(0), "h", "0");
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  };
  // Flat: the plugin's keys beside the agent's, as [[notify]] writes them.
  CHECK(notifier_error("file = \"/tmp/x\"\nrepeat_interval = \"1h\"\n").empty());
  CHECK(notifier_error("file = \"/tmp/x\"\nanswer = \"maybe\"\n") ==
        "kiwi.toml:4:10: notify.answer: expected one of \"ok\", \"retry\" or \"drop\", not "
        "\"maybe\"");
  CHECK(notifier_error("file = \"/tmp/x\"\nurl = 1\n") ==
        "kiwi.toml:4:1: notify.url: unknown option for plugin c_notifier; accepted: file, "
        "answer, kind, name, alerts, min_severity, repeat_interval");
  // Nested: options = {...}.
  CHECK(notifier_error("options = { file = \"/tmp/x\" }\n").empty());
  CHECK(notifier_error("options = { url = 1 }\n") ==
        "kiwi.toml:3:13: notify.options.url: unknown option for plugin c_notifier; accepted: "
        "file, answer");
}

TEST_CASE("loader: a notifier is looked up as kiwi-notifier-<name>.so, and kinds are not mixed") {
  NullLogger log;
  PluginLoader loader(KIWI_PLUGIN_DIR, log);
  CHECK(loader.resolve(kiwi::PluginKind::notifier, "ntfy") == KIWI_PLUGIN_DIR
        "/kiwi-notifier-ntfy.so");
  for (auto name : {"alertmanager", "webhook", "ntfy"}) {
    INFO(name);
    auto lib = loader.open(kiwi::PluginKind::notifier, entry(name));
    CHECK(lib->info->kind == kiwi::PluginKind::notifier);
    CHECK(lib->info->name == name);
  }
  CHECK_THROWS_WITH(loader.create_notifier(entry(KIWI_PLUGIN_DIR "/kiwi-sensor-cpu.so"), "h", "0"),
                    Catch::Contains("is a sensor plugin, not a notifier plugin"));
  CHECK_THAT(error_of(loader, entry(kTestPlugins + "/test-c_notifier.so")),
             Catch::Contains("is a notifier plugin, not a sensor plugin"));
}

TEST_CASE(
    "C ABI: a notifier needs ABI 1.6's descriptor, and older descriptors of other kinds load") {
  kiwi_plugin p{};
  p.abi_major = KIWI_ABI_MAJOR;
  p.abi_minor = KIWI_ABI_MINOR;
  p.kind = KIWI_KIND_NOTIFIER;
  p.name = {"n", 1};
  p.destroy = [](void*) {};
  p.notifier_create = [](const kiwi_notifier_context*, const kiwi_refusal*) -> void* {
    return nullptr;
  };
  p.notifier_send = [](void*, const kiwi_notification*, const kiwi_output_result*) {
    return std::uint32_t{KIWI_OUTPUT_OK};
  };
  p.size = sizeof p;
  CHECK(Descriptor(&p).info.kind == kiwi::PluginKind::notifier);
  // A descriptor that ends where ABI 1.5's did has no notifier functions to call.
  p.size = offsetof(kiwi_plugin, notifier_create);
  CHECK_THROWS_WITH(Descriptor(&p),
                    "a notifier descriptor without its create and send functions (ABI 1.6)");
  p.size = sizeof p;
  p.notifier_send = nullptr;
  CHECK_THROWS_WITH(Descriptor(&p),
                    "a notifier descriptor without its create and send functions (ABI 1.6)");
  // An output of ABI 1.1 to 1.5 (its descriptor ends at output_write) loads as before.
  kiwi_plugin o{};
  o.abi_major = KIWI_ABI_MAJOR;
  o.abi_minor = 5;
  o.kind = KIWI_KIND_OUTPUT;
  o.name = {"o", 1};
  o.destroy = [](void*) {};
  o.output_create = [](const kiwi_output_context*, const kiwi_refusal*) -> void* {
    return nullptr;
  };
  o.output_write = [](void*, const kiwi_output_batch*, const kiwi_output_result*) {
    return std::uint32_t{KIWI_OUTPUT_OK};
  };
  o.size = offsetof(kiwi_plugin, notifier_create);
  CHECK(Descriptor(&o).info.kind == kiwi::PluginKind::output);
  // A kind of a later minor version: refused, saying so.
  o.kind = 5;
  o.abi_minor = KIWI_ABI_MINOR + 1;
  CHECK_THROWS_WITH(Descriptor(&o), "unknown plugin kind 5 (the plugin is built for ABI 1." +
                                        std::to_string(KIWI_ABI_MINOR + 1) +
                                        ": it needs a newer agent)");
}
