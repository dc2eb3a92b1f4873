// Wiring of the data flow: Config -> PluginLoader -> Collector -> Store/Snapshot -> Router ->
// HttpServer. `main` parses the command line and calls one of these.
#pragma once

#include "config.hpp"
#include "log.hpp"

namespace kiwi::agent {

inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntime = 1;  // the machine said no: port in use, unwritable data_dir
inline constexpr int kExitConfig = 2;   // the configuration or a plugin is wrong

// Runs until SIGINT/SIGTERM; returns the process exit code.
int run_agent(const Config& config, StderrLogger& log);
// Validates the config and creates every declared plugin, without sampling or serving.
int check_config(const Config& config, StderrLogger& log);
// Prints a plugin's description and options (NAME is a sensor or handler name, or a path).
int describe_plugin(const Config& config, const std::string& name, StderrLogger& log);

}  // namespace kiwi::agent
