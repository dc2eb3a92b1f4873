#include "agent.hpp"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>

#include "collector.hpp"
#include "http_server.hpp"
#include "plugin_loader.hpp"
#include "router.hpp"
#include "service_notify.hpp"
#include "store.hpp"

#ifndef KIWI_VERSION
#define KIWI_VERSION "0.0.0"
#endif

namespace kiwi::agent {

namespace {

// What handlers may read. The collector and server are attached once they exist; handlers are
// only called after that.
class AgentData final : public DataSource {
 public:
  AgentData(const SnapshotHolder& snapshot, const Store* store)
      : snapshot_(snapshot), store_(store) {}
  std::shared_ptr<const Snapshot> snapshot() const override { return snapshot_.current(); }
  HistoryResult history(const HistoryQuery& q) const override {
    if (!store_) throw StoreError("no history store in this mode");
    return store_->query(q);
  }
  std::vector<std::string> series_names() const override {
    std::vector<std::string> out;
    if (store_)
      for (auto& s : *store_->series()) out.push_back(s.key);
    return out;
  }
  AgentStats stats() const override {
    AgentStats s;
    s.version = KIWI_VERSION;
    s.started_at = started_at;
    s.plugins = plugins;
    if (collector) {
      auto& c = collector->stats();
      s.ticks = c.ticks;
      s.missed_ticks = c.missed_ticks;
      s.store_write_errors = c.store_errors;
      s.store_failing_writes = c.store_failing_writes;
      if (s.store_failing_writes) s.store_last_error = collector->store_last_error();
      s.snapshot_file = snapshot_file;
      s.snapshot_file_errors = c.snapshot_file_errors;
      s.snapshot_file_failing = c.snapshot_file_failing;
      if (s.snapshot_file_failing)
        s.snapshot_file_last_error = collector->snapshot_file_last_error();
    }
    if (server) s.http_requests = server->request_counts();
    return s;
  }

  double started_at = 0;
  std::string snapshot_file;
  std::vector<PluginStatus> plugins;
  const Collector* collector = nullptr;
  const HttpServer* server = nullptr;

 private:
  const SnapshotHolder& snapshot_;
  const Store* store_;
};

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::vector<SensorSlot> load_sensors(const Config& cfg, PluginLoader& loader) {
  std::vector<SensorSlot> slots;
  for (auto& e : cfg.sensors) {
    SensorSlot slot;
    slot.instance = loader.create_sensor(e, cfg.agent.procfs, cfg.agent.sysfs);
    slot.name = e.name;
    slot.plugin = std::string(slot.instance.library->info->name);
    slot.every_ticks = e.interval ? e.interval->count() / cfg.collector.interval.count() : 1;
    slots.push_back(std::move(slot));
  }
  return slots;
}

std::vector<Route> load_routes(const Config& cfg, PluginLoader& loader, const DataSource& data) {
  std::vector<Route> routes;
  for (auto& e : cfg.routes)
    routes.push_back({e.path, std::make_shared<PluginInstance<Handler>>(
                                  loader.create_handler(e, data, KIWI_VERSION))});
  return routes;
}

}  // namespace

sigset_t handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2}) sigaddset(&set, sig);
  return set;
}

void block_signals() {
  sigset_t set = handled_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

int check_config(const Config& cfg, StderrLogger& log) {
  try {
    PluginLoader loader(cfg.agent.plugin_dir, log, cfg.agent.plugin_dir_pos);
    SnapshotHolder holder;
    AgentData data(holder, nullptr);
    auto sensors = load_sensors(cfg, loader);
    auto routes = load_routes(cfg, loader, data);
    std::cout << cfg.source << ": ok (" << sensors.size() << " sensors, " << routes.size()
              << " routes, bind " << cfg.http.bind.str() << ")\n";
    return kExitOk;
  } catch (const ConfigError& e) {
    std::cerr << "kiwi-agent: " << e.what() << "\n";
  } catch (const PluginError& e) {
    std::cerr << "kiwi-agent: " << e.what() << "\n";
  }
  return kExitConfig;
}

int describe_plugin(const Config& cfg, const std::string& name, StderrLogger& log) {
  PluginLoader loader(cfg.agent.plugin_dir, log, cfg.agent.plugin_dir_pos);
  PluginEntry entry;
  entry.plugin = name;
  entry.plugin_pos = {"--describe-plugin"};
  std::vector<std::string> errors;
  // A path names one file, of whichever kind it is; a name may be a sensor or a handler.
  std::vector<std::optional<PluginKind>> kinds = {PluginKind::sensor, PluginKind::handler};
  if (name.find('/') != std::string::npos) kinds = {std::nullopt};
  for (auto kind : kinds) {
    try {
      std::cout << describe_plugin(*loader.open(kind, entry));
      return kExitOk;
    } catch (const PluginError& e) {
      std::string what = e.what();  // without the "--describe-plugin:0:0: " place
      if (what.starts_with(entry.plugin_pos.str() + ": "))
        what.erase(0, entry.plugin_pos.str().size() + 2);
      errors.push_back(what);
    }
  }
  std::cerr << "kiwi-agent: --describe-plugin " << name << ": no such plugin:\n";
  for (auto& e : errors) std::cerr << "  " << e << "\n";
  return kExitConfig;
}

int run_agent(const Config& cfg, StderrLogger& log) {
  block_signals();  // already blocked by main(); again for callers that did not
  sigset_t signals = handled_signals();
  log.set_level(cfg.agent.log_level);
  // Before any thread starts: it takes systemd's variables out of the environment.
  const ServiceNotifier service = ServiceNotifier::from_environment();

  std::error_code ec;
  std::filesystem::create_directories(cfg.agent.data_dir, ec);
  if (ec) {
    log.error("cannot create data_dir " + cfg.agent.data_dir + ": " + ec.message() +
              " (set [agent] data_dir to a writable directory)");
    return kExitRuntime;
  }
  // The snapshot file is claimed first: a second agent on the same path stops here, before it
  // touches the first one's history or port.
  std::optional<SnapshotFile> snapshot_file;
  if (!cfg.collector.snapshot_path.empty()) {
    try {
      snapshot_file.emplace(cfg.collector.snapshot_path);
    } catch (const SnapshotFileInUse& e) {
      log.error(e.what());
      return kExitRuntime;
    } catch (const std::exception& e) {
      const std::string what = e.what();
      log.warn(
          what +
          "; the snapshot file is off (set [collector] snapshot_path, or \"\" to silence this)");
    }
  }

  try {
    Store store((std::filesystem::path(cfg.agent.data_dir) / "kiwi.db").string());
    SnapshotHolder holder;
    AgentData data(holder, &store);
    PluginLoader loader(cfg.agent.plugin_dir, log, cfg.agent.plugin_dir_pos);
    std::vector<SensorSlot> sensors;
    std::vector<Route> routes;
    try {
      sensors = load_sensors(cfg, loader);
      routes = load_routes(cfg, loader, data);
    } catch (const std::exception& e) {
      log.error(e.what());
      return kExitConfig;
    }
    const std::size_t sensor_count = sensors.size();
    data.started_at = unix_now();
    if (snapshot_file) data.snapshot_file = snapshot_file->path();
    for (auto& s : sensors)
      data.plugins.push_back({s.name, PluginKind::sensor, s.plugin, s.instance.library->file,
                              s.instance.library->abi_version, s.instance.library->info->metrics});
    for (auto& r : routes)
      data.plugins.push_back({r.path,
                              PluginKind::handler,
                              std::string(r.handler->library->info->name),
                              r.handler->library->file,
                              r.handler->library->abi_version,
                              {}});
    Collector collector({cfg.collector.interval, cfg.collector.retention, cfg.collector.stale_after,
                         cfg.collector.commit_interval, snapshot_file ? &*snapshot_file : nullptr,
                         host_name(), KIWI_VERSION, data.started_at,
                         [&service] { service.watchdog(); }, service.watchdog_every()},
                        std::move(sensors), store, holder, log);
    collector.tick_now();  // the first request already has a sample
    auto router = std::make_shared<const Router>(std::move(routes));
    HttpServer server({cfg.http.bind, cfg.http.threads, cfg.http.keep_alive,
                       cfg.http.max_connections, cfg.http.cors_origins},
                      router, log);
    data.collector = &collector;
    data.server = &server;
    server.start();
    collector.start();
    BindAddress shown = cfg.http.bind;
    shown.port = server.port();
    const std::string url = "http://" + shown.str() + "/";
    log.info("listening on " + url + " (" + std::to_string(sensor_count) + " sensors, " +
             std::to_string(router->routes().size()) + " routes, " +
             std::to_string(server.threads()) +
             (server.threads() == 1 ? " worker thread" : " worker threads") +
             (cfg.http.threads == 0 ? " (auto)" : "") + ", history in " + store.path() + ")");
    // The first sample is published and the port is open: systemd may start what depends on it.
    service.ready("serving " + url + " (" + std::to_string(sensor_count) + " sensors)");

    // Signals arrive here, in this thread, and nowhere else (all are blocked in every thread).
    // SIGHUP (also sent when the terminal of `tools/run.sh` closes) and SIGUSR1/2 never stop
    // the agent: no signal it handles may lose queued samples.
    for (;;) {
      int sig = 0;
      if (sigwait(&signals, &sig) != 0) continue;
      if (sig == SIGHUP) {
        log.warn(
            "received SIGHUP: reloading the configuration is not supported yet; nothing "
            "changed (restart the agent to apply a new configuration)");
        continue;
      }
      if (sig == SIGUSR1 || sig == SIGUSR2) {
        log.info(std::string("received ") + strsignal(sig) + ", ignored");
        continue;
      }
      log.info(std::string("received ") +
               (sig == SIGINT    ? "SIGINT"
                : sig == SIGQUIT ? "SIGQUIT"
                                 : "SIGTERM") +
               ", stopping");
      service.stopping();
      break;
    }
    server.stop();     // no new requests; in-flight ones finish
    collector.stop();  // finishes the tick in progress
    return kExitOk;    // router, collector, store close in reverse order of creation
  } catch (const StoreError& e) {
    log.error(std::string("history store: ") + e.what());
    return kExitRuntime;
  } catch (const std::exception& e) {
    log.error(e.what());
    return kExitRuntime;
  }
}

}  // namespace kiwi::agent
