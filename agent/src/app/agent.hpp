// Wiring of the data flow: Config -> PluginLoader -> Collector -> Store/Snapshot -> Router ->
// HttpServer. `main` parses the command line and calls one of these.
#pragma once

#include <signal.h>

#include <functional>

#include "base/log.hpp"
#include "config/config.hpp"

namespace kiwi::agent {

inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntime = 1;  // the machine said no: port in use, unwritable data_dir
inline constexpr int kExitConfig = 2;   // the configuration or a plugin is wrong

// The signals the agent handles (INT, TERM, QUIT stop it; HUP reloads; USR1, USR2 are logged).
// main() blocks them in its first statement, so that no thread ever takes one with its default
// action (which would kill the process and lose the queued samples); run_agent() waits for them.
// Programs the agent starts must unblock them (the mask is inherited across exec).
sigset_t handled_signals();
void block_signals();

// Runs until SIGINT/SIGTERM/SIGQUIT; returns the process exit code. SIGHUP calls `reread` for the
// configuration to apply (it throws ConfigError for a bad one, which then changes nothing).
int run_agent(const Config& config, StderrLogger& log, const std::function<Config()>& reread);
// Validates the config and creates every declared plugin, without sampling or serving.
int check_config(const Config& config, StderrLogger& log);
// Prints a plugin's description and options (NAME is a sensor or handler name, or a path).
int describe_plugin(const Config& config, const std::string& name, StderrLogger& log);
// Sends SIGHUP to the agent running on `config`: the pid its snapshot file's lock records. Exit 1
// when there is none (or no snapshot_path to find it by).
int signal_reload(const Config& config);
// Prints every plugin in plugin_dir and the built-in one: kind, name, description, file. Exit 2
// when one cannot be loaded (it is listed as broken, with why).
int list_plugins(const Config& config, StderrLogger& log);
// Samples every [[sensor]] twice, collector.interval apart (so counters have rates), as the
// collector would, and prints the second reading as /api/current's JSON. Exit 1 when a sensor
// failed or did not return within its timeout.
int sample_once(const Config& config, StderrLogger& log);

}  // namespace kiwi::agent
