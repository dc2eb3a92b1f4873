#include "app/agent.hpp"

#include <arpa/inet.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <iostream>
#include <kiwi/json.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "alert/engine.hpp"
#include "app/agent_data.hpp"
#include "app/service_notify.hpp"
#include "app/telemetry.hpp"
#include "base/clock.hpp"
#include "base/files.hpp"
#include "collect/collector.hpp"
#include "config/schema.hpp"
#include "http/http_server.hpp"
#include "http/router.hpp"
#include "output/notify.hpp"
#include "output/output.hpp"
#include "plugin/metric_check.hpp"
#include "plugin/plugin_loader.hpp"
#include "store/store.hpp"

namespace kiwi::agent {

namespace {

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::int64_t every_ticks(const PluginEntry& e, const Config& cfg) {
  return e.interval ? e.interval->count() / cfg.collector.interval.count() : 1;
}

SensorSpec sensor_spec(const PluginEntry& e, const Config& cfg, PluginInstance<Sensor> instance) {
  SensorSpec spec;
  spec.name = e.name;
  spec.every_ticks = every_ticks(e, cfg);
  spec.timeout = e.timeout.value_or(Millis(0));
  spec.labels.assign(e.labels.begin(), e.labels.end());
  spec.instance = std::move(instance);
  return spec;
}

std::vector<SensorSpec> load_sensors(const Config& cfg, PluginLoader& loader) {
  std::vector<SensorSpec> specs;
  for (auto& e : cfg.sensors) {
    auto spec = sensor_spec(e, cfg, loader.create_sensor(e, cfg.agent.procfs, cfg.agent.sysfs));
    spec.plugin = std::string(spec.instance.library->info->name);
    specs.push_back(std::move(spec));
  }
  return specs;
}

std::shared_ptr<PluginInstance<Handler>> load_route(const PluginEntry& e, PluginLoader& loader,
                                                    const DataSource& data,
                                                    std::span<const Peer> peers) {
  return std::make_shared<PluginInstance<Handler>>(
      loader.create_handler(e, data, KIWI_VERSION, peers, host_name()));
}

std::vector<Route> load_routes(const Config& cfg, PluginLoader& loader, const DataSource& data) {
  std::vector<Route> routes;
  for (auto& e : cfg.routes) routes.push_back({e.path, load_route(e, loader, data, cfg.peers)});
  return routes;
}

std::vector<OutputSpec> load_outputs(const Config& cfg, PluginLoader& loader) {
  std::vector<OutputSpec> specs;
  for (auto& e : cfg.outputs) {
    OutputSpec spec;
    spec.name = e.name;
    spec.interval = e.interval.value_or(spec.interval);
    spec.series = e.series;
    spec.max_samples = e.max_samples;
    spec.instance = loader.create_output(e, host_name(), KIWI_VERSION);
    spec.plugin = std::string(spec.instance.library->info->name);
    specs.push_back(std::move(spec));
  }
  return specs;
}

// [[notify]] entries, their plugins created (options checked) but not yet run: a NotifyRunner
// needs the store and the running agent's address.
std::vector<NotifierSpec> load_notifiers(const Config& cfg, PluginLoader& loader) {
  std::vector<NotifierSpec> specs;
  for (auto& e : cfg.notifiers) {
    NotifierSpec spec;
    spec.name = e.name;
    spec.kind = e.plugin;
    spec.alerts = e.alerts;
    spec.min_severity = severity_named(e.min_severity);
    spec.instance = loader.create_notifier(e, host_name(), KIWI_VERSION);
    spec.kind = std::string(spec.instance.library->info->name);
    spec.repeat_interval = e.repeat_interval.value_or(default_repeat_interval(spec.kind));
    spec.host = host_name();
    specs.push_back(std::move(spec));
  }
  return specs;
}

HttpSettings http_settings(const Config& cfg) {
  return {cfg.http.bind,         cfg.http.threads, cfg.http.keep_alive, cfg.http.max_connections,
          cfg.http.cors_origins, cfg.http.auth,    cfg.http.tls};
}

// Whether `b` listens on a loopback address only (127.0.0.0/8, ::1).
bool loopback_only(const BindAddress& b) {
  unsigned char a[16] = {};
  if (inet_pton(b.ipv6 ? AF_INET6 : AF_INET, b.host.c_str(), a) != 1) return false;
  if (!b.ipv6) return a[0] == 127;
  static const unsigned char one[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  return std::memcmp(a, one, sizeof a) == 0;
}

// The warning for an API open to the network: listening beyond loopback without [http.auth].
// And for credentials sent in the clear: [http.auth] beyond loopback without [http.tls].
void warn_if_exposed(const Config& cfg, const std::string& url, Logger& log) {
  if (loopback_only(cfg.http.bind)) return;
  if (!cfg.http.auth.enabled())
    log.warn("listening on " + url +
             " beyond loopback without authentication: anyone who reaches the port reads the API; "
             "set [http.auth] basic_users or bearer_tokens_file, or bind to 127.0.0.1");
  else if (!cfg.http.tls.enabled())
    log.warn("listening on " + url +
             " beyond loopback with [http.auth] but without TLS: passwords and tokens cross the "
             "network in the clear; set [http.tls] cert_file and key_file");
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

namespace {

// A loader's error without the place it names first ("--describe-plugin: "): a plugin named on
// the command line has no file and line to point at.
std::string without_place(const PluginError& e, const SourcePos& place) {
  std::string what = e.what();
  if (const std::string lead = place.str() + ": "; what.starts_with(lead))
    what.erase(0, lead.size());
  return what;
}

}  // namespace

int check_config(const Config& cfg, StderrLogger& log) {
  for (auto& w : cfg.warnings) log.warn(w);
  try {
    PluginLoader loader(cfg, log);
    SnapshotHolder holder;
    AgentData data(holder, nullptr);
    auto sensors = load_sensors(cfg, loader);
    auto routes = load_routes(cfg, loader, data);
    auto outputs = load_outputs(cfg, loader);
    auto notifiers = load_notifiers(cfg, loader);
    std::cout << cfg.source << ": ok (" << sensors.size() << " sensors, " << routes.size()
              << " routes, " << outputs.size() << " outputs, " << cfg.alert_rules.size()
              << " alert rules, " << notifiers.size() << " notify, " << cfg.peers.size()
              << " peers, bind " << cfg.http.bind.str() << ")\n";
    return kExitOk;
  } catch (const ConfigError& e) {
    std::cerr << "kiwi-agent: " << e.what() << "\n";
  } catch (const PluginError& e) {
    std::cerr << "kiwi-agent: " << e.what() << "\n";
  }
  return kExitConfig;
}

int describe_plugin(const Config& cfg, const std::string& name, StderrLogger& log) {
  PluginLoader loader(cfg, log);
  PluginEntry entry;
  entry.plugin = name;
  entry.plugin_pos = {"--describe-plugin"};
  std::vector<std::string> errors;
  // A path names one file, of whichever kind it is; a name may be of any kind.
  std::vector<std::optional<PluginKind>> kinds = {PluginKind::sensor, PluginKind::handler,
                                                  PluginKind::output, PluginKind::notifier};
  if (name.find('/') != std::string::npos) kinds = {std::nullopt};
  for (auto kind : kinds) {
    try {
      std::cout << describe_plugin(*loader.open(kind, entry));
      return kExitOk;
    } catch (const PluginError& e) {
      errors.push_back(without_place(e, entry.plugin_pos));
    }
  }
  std::cerr << "kiwi-agent: --describe-plugin " << name << ": cannot load it:\n";
  for (auto& e : errors) std::cerr << "  " << e << "\n";
  return kExitConfig;
}

int signal_reload(const Config& cfg) {
  // The agent running on this configuration is the one holding its snapshot file's lock, which
  // records its pid: no pid file of its own, and never an agent of another configuration.
  const std::string& path = cfg.collector.snapshot_path;
  if (path.empty()) {
    std::cerr << "kiwi-agent: --reload: " << cfg.source
              << " sets no collector.snapshot_path, whose lock file names the agent running on "
                 "it; send SIGHUP to its pid yourself (systemctl reload kiwi-agent under "
                 "systemd)\n";
    return kExitRuntime;
  }
  const long pid = SnapshotFile::holder(path);
  if (pid <= 0) {
    std::cerr << "kiwi-agent: --reload: no kiwi-agent is running on " << cfg.source
              << " (nothing holds the lock of its snapshot file " << path << ")\n";
    return kExitRuntime;
  }
  if (::kill(static_cast<pid_t>(pid), SIGHUP) != 0) {
    std::cerr << "kiwi-agent: --reload: cannot signal pid " << pid << ": " << std::strerror(errno)
              << "\n";
    return kExitRuntime;
  }
  std::cout << "kiwi-agent: sent SIGHUP to pid " << pid << " (running on " << cfg.source
            << "); its log says what was applied, /api/plugins its reload status\n";
  return kExitOk;
}

int list_plugins(const Config& cfg, StderrLogger& log) {
  // Every kiwi-<kind>-<name>.so in plugin_dir, then in the built-in one (a name in plugin_dir
  // is the one `plugin = "<name>"` loads), loaded to read its kind and description.
  PluginLoader loader(cfg, log);
  std::map<std::string, std::filesystem::path> seen;  // file name -> the directory it came from
  int broken = 0;
  std::vector<std::filesystem::path> dirs;
  for (const std::string& dir : {cfg.agent.plugin_dir, cfg.agent.builtin_plugin_dir}) {
    std::error_code ec;
    auto path = std::filesystem::weakly_canonical(dir, ec);
    if (ec) path = std::filesystem::path(dir).lexically_normal();
    if (std::find(dirs.begin(), dirs.end(), path) == dirs.end()) dirs.push_back(path);
  }
  for (const auto& dir : dirs) {
    std::error_code ec;
    std::vector<std::filesystem::path> files;
    for (auto& e : std::filesystem::directory_iterator(dir, ec)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (auto& path : files) {
      const std::string file = path.filename().string();
      if (!file.starts_with("kiwi-") || !file.ends_with(".so")) continue;
      if (auto [it, added] = seen.emplace(file, dir); !added) {
        std::cout << "(" << path.string() << ": not used, " << it->second.string() << " has one)\n";
        continue;
      }
      PluginEntry entry;
      entry.plugin = path.string();
      entry.plugin_pos = {"--list-plugins"};
      try {
        auto lib = loader.open(std::nullopt, entry);
        std::printf("%-8s %-14s %s (%s)\n", std::string(to_string(lib->info->kind)).c_str(),
                    std::string(lib->info->name).c_str(),
                    std::string(lib->info->description).c_str(), path.string().c_str());
      } catch (const PluginError& e) {
        std::cout << "broken   " << path.string() << ": " << without_place(e, entry.plugin_pos)
                  << "\n";
        ++broken;
      }
    }
  }
  std::cout << std::flush;
  return broken ? kExitConfig : kExitOk;
}

int sample_once(const Config& cfg, StderrLogger& log) {
  std::vector<SensorSpec> specs;
  std::unique_ptr<PluginLoader> loader;
  try {
    loader = std::make_unique<PluginLoader>(cfg, log);
    specs = load_sensors(cfg, *loader);
  } catch (const ConfigError& e) {
    std::cerr << "kiwi-agent: " << e.what() << "\n";
    return kExitConfig;
  } catch (const PluginError& e) {
    std::cerr << "kiwi-agent: " << e.what() << "\n";
    return kExitConfig;
  }
  // Two rounds, collector.interval apart, so that counters have their rates; the second is
  // printed. Each sensor's call runs on a thread of its own and is waited for until its timeout:
  // one that does not return by then is reported so and left behind (the process exits after).
  struct Sensor {
    SensorSpec* spec;
    ReportKeeper keeper;
    RateDeriver rates;
    bool hung = false;  // still in a call past its timeout: not called again
  };
  std::vector<Sensor> sensors;
  for (auto& spec : specs) {
    sensors.push_back({&spec, ReportKeeper(spec.name, spec.plugin), {}});
    sensors.back().keeper.set_labels(spec.labels);
  }
  SeriesRegistry series(cfg.collector.max_series_per_sensor);
  series.reserve(series.owner(kAgentReport), Telemetry::rows());
  auto unix_ms = [] { return real_clock().wall_ms(); };
  const std::int64_t started_ms = unix_ms();
  bool left_behind = false;
  for (int round = 0; round < 2; ++round) {
    if (round) std::this_thread::sleep_for(cfg.collector.interval);
    for (auto& s : sensors) {
      if (s.hung) continue;
      const Millis limit =
          sensor_timeout(s.spec->timeout, s.spec->every_ticks, cfg.collector.interval);
      auto done = std::make_shared<std::promise<SampleCall>>();
      auto result = done->get_future();
      const auto started = std::chrono::steady_clock::now();
      std::thread([done, &s, procfs = cfg.agent.procfs] {
        done->set_value(call_sensor(*s.spec->instance.object, s.rates, procfs));
      }).detach();
      if (result.wait_for(limit) != std::future_status::ready) {
        s.keeper.time_out(limit, unix_ms(), log);
        s.hung = left_behind = true;
        continue;
      }
      const double took =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      s.keeper.read(result.get(), took, unix_ms(), series, log);
    }
  }
  CollectorSettings settings;
  settings.host = host_name();
  settings.interval = cfg.collector.interval;
  settings.agent_version = KIWI_VERSION;
  settings.started_at = static_cast<double>(started_ms) / 1000.0;
  SnapshotAssembly assembly(1, unix_ms(), settings, nullptr, sensors.size());
  std::vector<const MetricValue*> fresh;
  bool failed = false;
  for (auto& s : sensors) {
    failed |= s.keeper.has_fresh() && s.keeper.fresh().state == SensorState::error;
    assembly.add(s.keeper, fresh);
  }
  std::cout << render_snapshot_json(*assembly.finish()) << std::endl;
  if (left_behind) std::_Exit(kExitRuntime);  // a sensor still in its call: not waited for
  return failed ? kExitRuntime : kExitOk;
}

namespace {

const PluginEntry* find_sensor(const Config& cfg, const std::string& name) {
  for (auto& e : cfg.sensors)
    if (e.name == name) return &e;
  return nullptr;
}
const PluginEntry* find_route(const Config& cfg, const std::string& path) {
  for (auto& e : cfg.routes)
    if (e.path == path) return &e;
  return nullptr;
}

// The running agent: the parts a reload keeps (store, snapshot, collector thread, HTTP server)
// and the configuration they run on, which a reload replaces all at once or not at all.
class RunningAgent {
 public:
  RunningAgent(Config cfg, StderrLogger& log, const ServiceNotifier& service,
               SnapshotFile* snapshot_file)
      : cfg_(std::move(cfg)),
        log_(log),
        service_(service),
        snapshot_file_(snapshot_file),
        store_((std::filesystem::path(cfg_.agent.data_dir) / "kiwi.db").string()),
        data_(holder_, &store_),
        loader_(std::make_unique<PluginLoader>(cfg_, log)) {}

  // However the run ended (an exception too): the HTTP workers and the collector thread, which
  // read each other's counters through data_ (telemetry, handlers), stop before either goes.
  ~RunningAgent() {
    if (server_) server_->stop();
    if (collector_) collector_->stop();
  }
  RunningAgent(const RunningAgent&) = delete;
  RunningAgent& operator=(const RunningAgent&) = delete;

  // Loads the plugins; throws what the loader throws (exit code 2).
  void load() {
    data_.started_at = unix_now();
    if (snapshot_file_) data_.snapshot_file = snapshot_file_->path();
    auto sensors = load_sensors(cfg_, *loader_);
    auto routes = load_routes(cfg_, *loader_, data_);
    auto outputs = load_outputs(cfg_, *loader_);
    for (auto& s : sensors) sensor_libraries_[s.name] = s.instance.library;
    sensor_count_ = sensors.size();
    collector_.emplace(collector_settings(cfg_), std::move(sensors), store_, holder_, log_,
                       real_clock());
    alerts_.configure(cfg_.alert_rules, cfg_.alerts.disable);
    collector_->report_self(kAgentReport, telemetry_);
    collector_->report_self(kAlertsReport, alerts_);
    server_.emplace(http_settings(cfg_), std::make_shared<const Router>(std::move(routes)), log_);
    data_.collector = &*collector_;
    data_.alert_list = [this] { return alerts_.alerts(); };
    data_.server = &*server_;
    pending_outputs_ = runners(std::move(outputs));
    pending_notifiers_ = load_notifiers(cfg_, *loader_);
    data_.notifier_status = [this] {
      std::vector<NotifierStatus> out;
      std::lock_guard lock(notifiers_mutex_);
      for (auto& n : notifiers_) out.push_back(n->status());
      return out;
    };
    publish_plugins();
    data_.config_applied(cfg_.source, false);
  }

  // Opens the port, then starts sampling: HTTP answers at once (503 on /api/current until the
  // first sample), however long the first sample takes.
  void start() {
    server_->start();
    collector_->start();
    for (auto& o : pending_outputs_) o->start();
    data_.swap_outputs(std::move(pending_outputs_));
    start_notifiers(std::move(pending_notifiers_));
    log_.info("listening on " + url() + " (" + std::to_string(sensor_count_) + " sensors, " +
              std::to_string(server_->router()->routes().size()) + " routes, " +
              std::to_string(server_->threads()) +
              (server_->threads() == 1 ? " worker thread" : " worker threads") +
              (cfg_.http.threads == 0 ? " (auto)" : "") + ", history in " + store_.path() + ")" +
              (cfg_.http.auth.enabled() ? ", authentication on" : ""));
    if (cfg_.http.tls.enabled())
      log_.info("https: certificate " + cfg_.http.tls.cert_file + ", key " +
                cfg_.http.tls.key_file + ", " + http_tls_library());
    warn_if_exposed(cfg_, url(), log_);
  }

  std::string url() const {
    BindAddress shown = cfg_.http.bind;
    shown.port = server_->port();
    return (cfg_.http.tls.enabled() ? "https://" : "http://") + shown.str() + "/";
  }
  std::size_t sensor_count() const { return sensor_count_; }

  // SIGHUP: reads the configuration again and applies it whole, or changes nothing.
  void reload(const std::function<Config()>& reread) {
    const auto began = std::chrono::steady_clock::now();
    log_.info("received SIGHUP: reloading " + cfg_.source);
    try {
      Config next = reread();
      for (auto& w : next.warnings) log_.warn(w);
      check_reloadable(cfg_, next);
      apply(std::move(next), began);
    } catch (const std::exception& e) {
      // ConfigError, PluginError, a listener that cannot be opened: worded as --check-config
      // and start-up word them, on one line.
      std::string what = e.what();
      for (auto& c : what)
        if (c == '\n') c = ' ';
      log_.error("reload failed, the running configuration stays (generation " +
                 std::to_string(data_.generation()) + "): " + what);
      data_.reload_failed(what);
    }
  }

  // SIGTERM: no new requests (those in flight finish), then the last tick and commit.
  // Returns the number of sensors abandoned in a call that never returned.
  std::size_t stop() {
    server_->stop();
    // Outputs first: each waits at most for its write in progress (its timeout); their cursors
    // then reach the file with the collector's last commit.
    for (auto& o : data_.swap_outputs({})) o->stop();
    stop_notifiers();
    collector_->stop();
    return collector_->abandoned();
  }

 private:
  CollectorSettings collector_settings(const Config& cfg) const {
    return {cfg.collector.interval,
            cfg.collector.retention,
            cfg.collector.minute_retention,
            cfg.collector.hour_retention,
            cfg.collector.stale_after,
            cfg.collector.commit_interval,
            static_cast<std::size_t>(cfg.collector.max_series_per_sensor),
            snapshot_file_,
            host_name(),
            KIWI_VERSION,
            data_.started_at,
            [this] { service_.watchdog(); },
            service_.watchdog_every(),
            cfg.agent.procfs};
  }

  // The notifiers of `specs` run, on this agent's address (for links in notifications). Their
  // libraries are listed in /api/plugins.
  void start_notifiers(std::vector<NotifierSpec> specs) {
    std::vector<std::unique_ptr<NotifyRunner>> next;
    notifier_libraries_.clear();
    for (auto& spec : specs) {
      notifier_libraries_[spec.name] = spec.instance.library;
      spec.agent_url = url();
      auto* log = spec.instance.log.get();
      next.push_back(std::make_unique<NotifyRunner>(
          std::move(spec), store_, [this] { return alerts_.alerts(); },
          [this] { forget_notified(); }, *log, real_clock()));
    }
    for (auto& n : next) n->start();
    std::lock_guard lock(notifiers_mutex_);
    notifiers_ = std::move(next);
  }
  // Taken out under the lock and stopped outside it: a runner's thread may be waiting for the
  // lock in forget_notified().
  void stop_notifiers() {
    std::vector<std::unique_ptr<NotifyRunner>> old;
    {
      std::lock_guard lock(notifiers_mutex_);
      old.swap(notifiers_);
    }
    for (auto& n : old) n->stop();
  }
  // Transitions every notifier has are forgotten (none: the store's cap bounds the log).
  void forget_notified() {
    std::lock_guard lock(notifiers_mutex_);
    if (notifiers_.empty()) return;
    std::uint64_t through = UINT64_MAX;
    for (auto& n : notifiers_) through = std::min(through, n->acked());
    store_.forget_alert_events(through);
  }

  std::vector<std::unique_ptr<OutputRunner>> runners(std::vector<OutputSpec> specs) {
    std::vector<std::unique_ptr<OutputRunner>> out;
    for (auto& spec : specs) {
      output_libraries_[spec.name] = spec.instance.library;
      auto* log = spec.instance.log.get();
      out.push_back(std::make_unique<OutputRunner>(std::move(spec), store_, *log, real_clock()));
    }
    return out;
  }

  void publish_plugins() {
    std::vector<PluginStatus> list;
    for (auto& e : cfg_.sensors) {
      auto& lib = sensor_libraries_.at(e.name);
      list.push_back({e.name, PluginKind::sensor, std::string(lib->info->name), lib->file,
                      lib->abi_major, lib->abi_minor, lib->info->metrics, lib});
    }
    // The agent's own report: its rows give /metrics its HELP; built in, so no file.
    list.push_back({std::string(kAgentReport), PluginKind::sensor, std::string(kAgentReport), "",
                    KIWI_ABI_MAJOR, KIWI_ABI_MINOR, Telemetry::rows(), nullptr});
    list.push_back({std::string(kAlertsReport), PluginKind::sensor, std::string(kAlertsReport), "",
                    KIWI_ABI_MAJOR, KIWI_ABI_MINOR, alerts_.metrics(), nullptr});
    for (auto& r : server_->router()->routes()) {
      auto& lib = r.handler->library;
      list.push_back({r.path,
                      PluginKind::handler,
                      std::string(lib->info->name),
                      lib->file,
                      lib->abi_major,
                      lib->abi_minor,
                      {},
                      lib});
    }
    {
      std::lock_guard lock(notifiers_mutex_);
      for (auto& n : notifiers_) {
        auto& lib = notifier_libraries_.at(n->name());
        list.push_back({n->name(),
                        PluginKind::notifier,
                        std::string(lib->info->name),
                        lib->file,
                        lib->abi_major,
                        lib->abi_minor,
                        {},
                        lib});
      }
    }
    for (auto& e : cfg_.outputs) {
      auto& lib = output_libraries_.at(e.name);
      list.push_back({e.name,
                      PluginKind::output,
                      std::string(lib->info->name),
                      lib->file,
                      lib->abi_major,
                      lib->abi_minor,
                      {},
                      lib});
    }
    data_.set_plugins(std::move(list));
  }

  // Everything that can fail comes first (plugins, options, the new listener); then the parts
  // swap over. An unchanged sensor or route (same plugin, same options, same file on disk) keeps
  // its running instance.
  void apply(Config next, std::chrono::steady_clock::time_point began) {
    std::vector<std::string> changes;
    auto next_loader = std::make_unique<PluginLoader>(next, log_, loader_->cache());
    PluginLoader& loader = *next_loader;

    std::vector<SensorSpec> sensors;
    std::map<std::string, std::shared_ptr<LoadedLibrary>> libraries;
    for (auto& e : next.sensors) {
      auto lib = loader.open(PluginKind::sensor, e);
      const PluginEntry* old = find_sensor(cfg_, e.name);
      const bool same_file = old && sensor_libraries_.at(e.name) == lib;
      if (old && same_file && same_instance(*old, e)) {
        auto spec = sensor_spec(e, next, {});  // keeps the running instance and its state
        spec.plugin = std::string(lib->info->name);
        // Its own schedule; a new collector.interval is logged once, below.
        if (old->interval != e.interval || old->timeout != e.timeout)
          changes.push_back("sensor " + e.name + " rescheduled");
        if (old->labels != e.labels) changes.push_back("sensor " + e.name + " relabelled");
        sensors.push_back(std::move(spec));
      } else {
        auto spec =
            sensor_spec(e, next, loader.create_sensor(e, next.agent.procfs, next.agent.sysfs));
        spec.plugin = std::string(lib->info->name);
        changes.push_back("sensor " + e.name +
                          (!old                     ? " added"
                           : same_instance(*old, e) ? " reloaded (its plugin file changed)"
                                                    : " changed"));
        sensors.push_back(std::move(spec));
      }
      libraries[e.name] = lib;
    }
    for (auto& e : cfg_.sensors)
      if (!find_sensor(next, e.name)) changes.push_back("sensor " + e.name + " removed");

    std::vector<Route> routes;
    const auto running = server_->router();
    for (auto& e : next.routes) {
      auto lib = loader.open(PluginKind::handler, e);
      const PluginEntry* old = find_route(cfg_, e.path);
      std::shared_ptr<PluginInstance<Handler>> kept;
      // Every handler is told of the peers, and those that fetch read the peers' credential
      // files when made: with peers, every reload makes every route anew (a rotated token is
      // read again).
      const bool peers_again = !next.peers.empty() || !cfg_.peers.empty();
      if (old && same_instance(*old, e) && !peers_again)
        for (auto& r : running->routes())
          if (r.path == e.path && r.handler->library == lib) kept = r.handler;
      if (!kept)
        changes.push_back("route " + e.path +
                          (!old                      ? " added"
                           : !same_instance(*old, e) ? " changed"
                           : peers_again
                               ? " reloaded (the peers and their credentials are read again)"
                               : " reloaded (its plugin file changed)"));
      routes.push_back({e.path, kept ? kept : load_route(e, loader, data_, next.peers)});
    }
    for (auto& e : cfg_.routes)
      if (!find_route(next, e.path)) changes.push_back("route " + e.path + " removed");

    // Port 0 ("any free port") keeps the port it got: only another address is a move. The
    // running configuration is compared as it runs, on the port it got.
    cfg_.http.bind.port = server_->port();
    if (next.http.bind.port == 0 && next.http.bind.host == cfg_.http.bind.host &&
        next.http.bind.ipv6 == cfg_.http.bind.ipv6)
      next.http.bind.port = cfg_.http.bind.port;
    for (auto& c : setting_changes(cfg_, next)) changes.push_back(std::move(c));
    const HttpSettings http = http_settings(next);

    // Outputs are made anew (a running one keeps no state but its cursor, which is in the
    // store): every entry of `next`, created here, started once nothing else can fail.
    auto outputs = load_outputs(next, loader);
    auto notifiers = load_notifiers(next, loader);
    for (auto& e : next.notifiers) changes.push_back("notify " + e.name + " (re)started");
    for (auto& e : cfg_.notifiers) {
      bool kept = false;
      for (auto& n : next.notifiers) kept |= n.name == e.name;
      if (!kept) changes.push_back("notify " + e.name + " removed");
    }
    for (auto& e : next.outputs) changes.push_back(e.table + " " + e.name + " (re)started");
    for (auto& e : cfg_.outputs) {
      bool kept = false;
      for (auto& n : next.outputs) kept |= n.name == e.name;
      if (!kept) changes.push_back(e.table + " " + e.name + " removed");
    }

    // The last step that can fail: the server opens a new listener before it closes the old.
    const std::string old_url = url();
    server_->reconfigure(http, std::make_shared<const Router>(std::move(routes), running.get()));
    // From here on nothing fails.
    if (next.peers != cfg_.peers)
      changes.push_back("peers changed (" + std::to_string(next.peers.size()) + " peers)");
    if (next.alert_rules != cfg_.alert_rules || next.alerts.disable != cfg_.alerts.disable)
      changes.push_back("alert rules changed (" + std::to_string(next.alert_rules.size()) +
                        " rules, " + std::to_string(next.alerts.disable.size()) + " disabled)");
    alerts_.configure(next.alert_rules, next.alerts.disable);
    collector_->reconfigure(collector_settings(next), std::move(sensors));
    // The old outputs stop first (each finishes its write in progress), so two threads never
    // move one cursor; the new ones read it from the store when they are made.
    for (auto& o : data_.swap_outputs({})) o->stop();
    output_libraries_.clear();
    auto next_runners = runners(std::move(outputs));
    for (auto& o : next_runners) o->start();
    data_.swap_outputs(std::move(next_runners));
    // Notifiers as outputs: the old ones finish their send in progress first; the new ones read
    // their cursors from the store.
    stop_notifiers();
    start_notifiers(std::move(notifiers));
    // The verdict below is logged at the more verbose of the two levels, so it is always seen.
    const LogLevel level = next.agent.log_level;
    if (level > cfg_.agent.log_level) log_.set_level(level);
    cfg_ = std::move(next);
    sensor_libraries_ = std::move(libraries);
    sensor_count_ = cfg_.sensors.size();
    loader_ = std::move(next_loader);
    publish_plugins();
    data_.config_applied(cfg_.source, true);
    const auto ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count();
    char took[32];
    std::snprintf(took, sizeof took, "%.1f ms", ms);
    std::string summary;
    for (auto& c : changes) summary += (summary.empty() ? "" : "; ") + c;
    log_.info("reloaded " + cfg_.source + " in " + took + " (generation " +
              std::to_string(data_.generation()) +
              "): " + (summary.empty() ? "no changes" : summary) +
              (url() != old_url ? "; now listening on " + url() : ""));
    log_.set_level(level);
    warn_if_exposed(cfg_, url(), log_);
  }

  Config cfg_;
  StderrLogger& log_;
  const ServiceNotifier& service_;
  SnapshotFile* snapshot_file_;
  Store store_;
  SnapshotHolder holder_;
  AgentData data_;
  Telemetry telemetry_{data_, cfg_.agent.procfs};  // the collector's own report: outlives it
  AlertEngine alerts_{store_, log_};  // the alert rules' report: outlives the collector
  std::unique_ptr<PluginLoader> loader_;
  std::map<std::string, std::shared_ptr<LoadedLibrary>> sensor_libraries_;  // by sensor name
  std::map<std::string, std::shared_ptr<LoadedLibrary>> output_libraries_;  // by output name
  std::vector<std::unique_ptr<OutputRunner>> pending_outputs_;  // made by load(), run by start()
  std::vector<NotifierSpec> pending_notifiers_;                 // made by load(), run by start()
  std::mutex notifiers_mutex_;  // notifiers_: swapped by reload, read by their threads and HTTP
  std::vector<std::unique_ptr<NotifyRunner>> notifiers_;
  std::map<std::string, std::shared_ptr<LoadedLibrary>> notifier_libraries_;  // by notify name
  std::size_t sensor_count_ = 0;
  std::optional<Collector> collector_;
  std::optional<HttpServer> server_;
};

}  // namespace

int run_agent(const Config& initial, StderrLogger& log, const std::function<Config()>& reread) {
  block_signals();  // already blocked by main(); again for callers that did not
  sigset_t signals = handled_signals();
  log.set_level(initial.agent.log_level);
  for (auto& w : initial.warnings) log.warn(w);
  // Before any thread starts: it takes systemd's variables out of the environment.
  const ServiceNotifier service = ServiceNotifier::from_environment();

  try {
    make_directories(initial.agent.data_dir);
  } catch (const std::system_error& e) {
    log.error("cannot create data_dir " + initial.agent.data_dir + ": " + e.code().message() +
              " (set [agent] data_dir to a writable directory)");
    return kExitRuntime;
  }
  // SQLite follows links when it creates the database's -wal and -shm files: in a directory
  // another user can write, they could point those at any file.
  try {
    require_private_directory(initial.agent.data_dir, "data_dir " + initial.agent.data_dir);
  } catch (const std::exception& e) {
    log.error(e.what());
    return kExitRuntime;
  }
  // The snapshot file is claimed first: a second agent on the same path stops here, before it
  // touches the first one's history or port.
  std::optional<SnapshotFile> snapshot_file;
  if (!initial.collector.snapshot_path.empty()) {
    try {
      snapshot_file.emplace(initial.collector.snapshot_path);
    } catch (const SnapshotFileInUse& e) {
      log.error(e.what());
      return kExitRuntime;
    } catch (const UnsafeDirectory& e) {
      // Not just the file off: the configuration points the agent at a directory where another
      // user could make it overwrite any file, and a warning in a running agent's log is easy to
      // miss; the unit's start fails instead, naming the directory.
      log.error(e.what());
      return kExitRuntime;
    } catch (const std::exception& e) {
      const std::string what = e.what();
      log.warn(
          what +
          "; the snapshot file is off (set [collector] snapshot_path, or \"\" to silence this)");
    }
  }

  std::size_t abandoned = 0;
  try {
    RunningAgent agent(initial, log, service, snapshot_file ? &*snapshot_file : nullptr);
    try {
      agent.load();
    } catch (const std::exception& e) {
      log.error(e.what());
      return kExitConfig;
    }
    agent.start();
    // The port is open (the first sample follows within half an interval): systemd may start
    // what depends on the agent.
    service.ready("serving " + agent.url() + " (" + std::to_string(agent.sensor_count()) +
                  " sensors)");

    // Signals arrive here, in this thread, and nowhere else (all are blocked in every thread).
    // SIGHUP reloads; SIGUSR1/2 are ignored: no signal it handles may lose queued samples.
    for (;;) {
      int sig = 0;
      if (sigwait(&signals, &sig) != 0) continue;
      if (sig == SIGHUP) {
        service.reloading();
        agent.reload(reread);
        service.ready("serving " + agent.url() + " (" + std::to_string(agent.sensor_count()) +
                      " sensors)");
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
    abandoned = agent.stop();
  } catch (const ForeignDatabase& e) {
    // Another application's database where ours should be: a configuration mistake (data_dir).
    log.error(std::string("history store: ") + e.what());
    return kExitConfig;
  } catch (const StoreError& e) {
    log.error(std::string("history store: ") + e.what());
    return kExitRuntime;
  } catch (const std::exception& e) {
    log.error(e.what());
    return kExitRuntime;
  }
  if (abandoned > 0) {
    // A sensor thread is still inside its plugin's code: returning from main would run the
    // process's static destructors under it. History is committed and the store closed.
    log.warn("exiting with " + std::to_string(abandoned) +
             (abandoned == 1 ? " sensor" : " sensors") + " still in a call that never returned");
    snapshot_file.reset();
    std::fflush(nullptr);
    ::_exit(kExitOk);
  }
  return kExitOk;
}

}  // namespace kiwi::agent
