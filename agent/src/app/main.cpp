// kiwi-agent command line. See README.md "Running" for what each option does.
#include <sys/prctl.h>
#include <unistd.h>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "app/agent.hpp"
#include "base/fatal_signal.hpp"
#include "config/schema.hpp"
#include "http/http_server.hpp"
#include "plugin/plugin_loader.hpp"

namespace {

constexpr const char* kUsage =
    "usage: kiwi-agent [--config FILE]\n"
    "       kiwi-agent --check-config FILE\n"
    "       kiwi-agent --print-default-config\n"
    "       kiwi-agent --print-config [--config FILE]\n"
    "       kiwi-agent --describe-plugin NAME [--config FILE]\n"
    "       kiwi-agent --list-plugins [--config FILE]\n"
    "       kiwi-agent --once [--config FILE]\n"
    "       kiwi-agent --reload [--config FILE]\n"
    "       kiwi-agent --version | --help\n"
    "\n"
    "Without --config, runs on the built-in default configuration (--print-default-config).\n"
    "An option's value may also be given as --option=VALUE.\n"
    "Exit codes: 0 ok, 1 runtime failure (port in use, unwritable directory), 2 bad\n"
    "configuration or plugin.\n";

// glibc's per-thread malloc cache (tcache) keeps up to 7 freed chunks of each of 64 sizes per
// thread, out of reach of malloc_trim: under load, as more sizes pass through a worker, it pins
// more heap pages, and the agent's RSS crept up by about 100 KiB over a 5-minute history soak.
// With a cache of one chunk per size the creep stays within a few tens of KiB (no cache at all
// saved a little more but cost about 2 % throughput; README "Performance"). glibc reads the
// setting only from the environment, before main, so the agent sets it and executes itself
// again, once, at start (same process id; KIWI_AGENT_TUNED marks the second run, so it happens
// once whatever glibc makes of the variable). An explicit glibc.malloc.tcache_count in
// GLIBC_TUNABLES is left alone, as is a failed exec (the agent then runs with glibc's default).
// It executes the file /proc/self/exe points to, not /proc/self/exe itself: the kernel names the
// process after the file executed (comm, in ps, top, ss and dmesg), which would make it "exe".
constexpr const char* kTcacheTunable = "glibc.malloc.tcache_count";
constexpr const char* kTcacheCount = "1";

void apply_malloc_tunables(char** argv) {
  if (std::getenv("KIWI_AGENT_TUNED")) return;
  const char* current = std::getenv("GLIBC_TUNABLES");
  if (current && std::strstr(current, kTcacheTunable)) return;
  std::string value = current && *current ? std::string(current) + ":" : std::string();
  value += std::string(kTcacheTunable) + "=" + kTcacheCount;
  if (::setenv("GLIBC_TUNABLES", value.c_str(), 1) != 0 ||
      ::setenv("KIWI_AGENT_TUNED", "1", 1) != 0)
    return;
  // readlink, not realpath(): the link is the file this process runs, whatever its name.
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0 || static_cast<std::size_t>(n) >= sizeof self - 1) return;
  self[n] = '\0';
  // A binary replaced since it started (an upgrade) reads "<path> (deleted)": that name is no
  // longer this program; the link itself still runs it.
  if (std::string_view(self, static_cast<std::size_t>(n)).ends_with(" (deleted)")) {
    ::execv("/proc/self/exe", argv);
    return;
  }
  ::execv(self, argv);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kiwi::agent;
  block_signals();  // first: a SIGHUP during start-up must not kill the agent (agent.hpp)
  install_fatal_signal_handler();  // a plugin that crashes the agent is named in the log
  // What an exec or cgi program leaves running outside its process group (setsid) becomes the
  // agent's child, not init's, so the run that started it kills and reaps it (kiwi/process.hpp).
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  StderrLogger log;
  std::string config_path, describe;
  // What to do with the configuration; one command a run (the last one given counts).
  enum class Command { run, check, describe, list, once, reload, print };
  Command command = Command::run;
  // The commands given as a switch alone, each with what it does.
  static constexpr std::pair<std::string_view, Command> kSwitches[] = {
      {"--list-plugins", Command::list},
      {"--once", Command::once},
      {"--reload", Command::reload},
      {"--print-config", Command::print},
  };
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    // "--config=FILE" is "--config FILE".
    std::optional<std::string> inline_value;
    if (auto eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      inline_value = std::string(arg.substr(eq + 1));
      arg = arg.substr(0, eq);
    }
    auto value = [&]() -> std::string {
      if (inline_value) return *inline_value;
      if (i + 1 >= argc) {
        std::cerr << "kiwi-agent: " << arg << " needs a value\n" << kUsage;
        std::exit(kExitConfig);
      }
      return argv[++i];
    };
    auto no_value = [&] {
      if (!inline_value) return;
      std::cerr << "kiwi-agent: " << arg << " takes no value\n" << kUsage;
      std::exit(kExitConfig);
    };
    const auto* sw = std::find_if(std::begin(kSwitches), std::end(kSwitches),
                                  [&](auto& s) { return s.first == arg; });
    if (sw != std::end(kSwitches)) {
      no_value();
      command = sw->second;
    } else if (arg == "--config") {
      config_path = value();
    } else if (arg == "--check-config") {
      config_path = value();
      command = Command::check;
    } else if (arg == "--describe-plugin") {
      describe = value();
      command = Command::describe;
    } else if (arg == "--print-default-config") {
      no_value();
      std::cout << default_config_text();
      return kExitOk;
    } else if (arg == "--version") {
      no_value();
      std::cout << "kiwi-agent " << KIWI_VERSION << " (plugin ABI " << KIWI_ABI_MAJOR << "."
                << KIWI_ABI_MINOR << ")\n"
                << http_library_version() << "\n";
      return kExitOk;
    } else if (arg == "--help" || arg == "-h") {
      no_value();
      std::cout << kUsage;
      return kExitOk;
    } else {
      std::cerr << "kiwi-agent: unknown argument '" << argv[i] << "'\n" << kUsage;
      return kExitConfig;
    }
  }

  if (command == Command::run) apply_malloc_tunables(argv);

  const std::string exe_dir = kiwi::agent::program_directory();
  // The configuration at start, and again on every SIGHUP (the same file, read anew).
  auto read_config = [&] {
    return config_path.empty() ? default_config(exe_dir) : load_config_file(config_path, exe_dir);
  };
  Config config;
  try {
    config = read_config();
  } catch (const ConfigError& e) {
    std::cerr << "kiwi-agent: " << e.what() << "\n";
    return kExitConfig;
  }
  switch (command) {
    case Command::check:
      return check_config(config, log);
    case Command::describe:
      return describe_plugin(config, describe, log);
    case Command::list:
      return list_plugins(config, log);
    case Command::once:
      return sample_once(config, log);
    case Command::reload:
      return signal_reload(config);
    case Command::print:
      std::cout << render_toml(config);
      return kExitOk;
    case Command::run:
      break;
  }
  return run_agent(config, log, read_config);
}
