// What the HTTP handlers may read of the running agent (kiwi::DataSource): the snapshot, the
// history, and the counters of its parts; also what the agent's own report reads
// (app/telemetry.hpp).
#pragma once

#include <functional>
#include <kiwi/handler.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collect/collector.hpp"
#include "collect/snapshot.hpp"
#include "http/http_server.hpp"
#include "output/output.hpp"
#include "store/store.hpp"

#ifndef KIWI_VERSION
#define KIWI_VERSION "0.0.0"
#endif

namespace kiwi::agent {

// The wall clock, unix seconds.
double unix_now();

// What handlers may read. The collector and server are attached once they exist; handlers are
// only called after that. The plugin list and the configuration status change on reload, while
// handlers read them on HTTP workers: they are guarded by a mutex (a copy per stats() call).
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
    if (!store_) return out;
    // Held here: ranging over `*store_->series()` would free the temporary copy at once, and the
    // collector may publish a newer catalog (dropping the last other copy) while this one is read.
    const Store::Catalog catalog = store_->series();
    for (auto& s : *catalog) out.push_back(s.key);
    return out;
  }
  AgentStats stats() const override;
  // stats() without the plugin list and the alert counts: what the agent's own report reads at
  // every tick (the notifiers are in it).
  AgentStats counters() const;
  // The rule engine's instances (alert_list), as it sorted them; none while it has not been set.
  std::vector<Alert> alerts() const override {
    return alert_list ? alert_list() : std::vector<Alert>();
  }

  // The running outputs, swapped whole by a reload (the old ones stopped by the caller after).
  std::vector<std::unique_ptr<OutputRunner>> swap_outputs(
      std::vector<std::unique_ptr<OutputRunner>> next) {
    std::lock_guard lock(outputs_mutex_);
    outputs_.swap(next);
    return next;
  }

  void set_plugins(std::vector<PluginStatus> plugins) {
    std::lock_guard lock(mutex_);
    plugins_ = std::move(plugins);
  }
  // A configuration took effect (at start, or by a reload that applied).
  void config_applied(const std::string& source, bool reload) {
    std::lock_guard lock(mutex_);
    const double now = unix_now();
    if (reload) {
      ++config_.generation;
      ++config_.reloads_ok;
      config_.reload_status = "ok";
      config_.reload_at = now;
      config_.reload_message.clear();
    }
    config_.loaded_at = now;
    config_.source = source;
  }
  void reload_failed(const std::string& message) {
    std::lock_guard lock(mutex_);
    ++config_.reloads_failed;
    config_.reload_status = "failed";
    config_.reload_at = unix_now();
    config_.reload_message = message;
  }
  std::uint64_t generation() const {
    std::lock_guard lock(mutex_);
    return config_.generation;
  }

  double started_at = 0;
  std::string snapshot_file;
  const Collector* collector = nullptr;
  const HttpServer* server = nullptr;
  // Set once by the agent before the HTTP server starts, both thread-safe (called from HTTP
  // workers and the collector's thread); empty: no alerts, no notifiers. alert_list: every alert
  // instance that is not inactive, firing first (DataSource::alerts()); notifier_status: each
  // [[notify]] and its queue.
  std::function<std::vector<Alert>()> alert_list;
  std::function<std::vector<NotifierStatus>()> notifier_status;

 private:
  const SnapshotHolder& snapshot_;
  const Store* store_;
  mutable std::mutex mutex_;
  std::vector<PluginStatus> plugins_;
  ConfigStatus config_;
  mutable std::mutex outputs_mutex_;  // status() copies under it; no I/O
  std::vector<std::unique_ptr<OutputRunner>> outputs_;
};

}  // namespace kiwi::agent
