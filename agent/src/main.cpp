// kiwi-agent command line. See README.md "Running" for what each option does.
#include <boost/dll/runtime_symbol_info.hpp>
#include <cstring>
#include <iostream>

#include "agent.hpp"
#include "http_server.hpp"

namespace {

constexpr const char* kUsage =
    "usage: kiwi-agent [--config FILE]\n"
    "       kiwi-agent --check-config FILE\n"
    "       kiwi-agent --print-default-config\n"
    "       kiwi-agent --describe-plugin NAME [--config FILE]\n"
    "       kiwi-agent --version | --help\n"
    "\n"
    "Without --config, runs on the built-in default configuration (--print-default-config).\n"
    "Exit codes: 0 ok, 1 runtime failure (port in use, unwritable directory), 2 bad\n"
    "configuration or plugin.\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace kiwi::agent;
  StderrLogger log;
  std::string config_path, describe;
  bool check = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "kiwi-agent: " << arg << " needs a value\n" << kUsage;
        std::exit(kExitConfig);
      }
      return argv[++i];
    };
    if (arg == "--config") {
      config_path = value();
    } else if (arg == "--check-config") {
      config_path = value();
      check = true;
    } else if (arg == "--describe-plugin") {
      describe = value();
    } else if (arg == "--print-default-config") {
      std::cout << default_config_text();
      return kExitOk;
    } else if (arg == "--version") {
      std::cout << "kiwi-agent " << KIWI_VERSION << " (plugin ABI " << KIWI_ABI_VERSION << ")\n"
                << http_library_version() << "\n";
      return kExitOk;
    } else if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return kExitOk;
    } else {
      std::cerr << "kiwi-agent: unknown argument '" << arg << "'\n" << kUsage;
      return kExitConfig;
    }
  }

  const std::string exe_dir = boost::dll::program_location().parent_path().string();
  Config config;
  try {
    config = config_path.empty() ? default_config(exe_dir) : load_config_file(config_path, exe_dir);
  } catch (const ConfigError& e) {
    std::cerr << "kiwi-agent: " << e.what() << "\n";
    return kExitConfig;
  }
  if (check) return check_config(config, log);
  if (!describe.empty()) return describe_plugin(config, describe, log);
  return run_agent(config, log);
}
