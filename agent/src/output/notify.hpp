// Notifiers ([[notify]], docs/alerts.md): each on a thread of its own ("kiwi-n:<name>") reads the
// alert transitions the rule engine logged in the store after its cursor, oldest first, and hands
// them to its plugin (alertmanager, webhook, ntfy: transport only, kiwi/notifier.hpp), moving the
// cursor on what the receiver took. As outputs do: RETRY (no connection, timeout, 5xx, 429) waits
// backoff_delay(n) after the n-th failure in a row (1 s doubling, at most 30 s) and sends the same
// batch again, so a receiver that is down for an hour gets every firing and resolve afterwards,
// in order; DROP (another 4xx) is logged and counted and the batch skipped.
//
// Cursor: the newest transition the receiver took, "notify:<name>" in the store's cursors,
// written with the collector's next commit. A crash can send again what was taken during the last
// commit interval (Alertmanager and most receivers take a repeat silently). A notifier without a
// cursor (new in the configuration) starts at the newest transition and sends, once, the alerts
// firing then.
//
// Repeats: while alerts fire, the ones it is told of are sent again every repeat_interval (default
// 1m for alertmanager, which expects a client to re-send, with endsAt 4 intervals ahead, as
// Prometheus does; 4h for the others). The first repeat comes an interval after start, so a
// restart sends nothing twice.
#pragma once

#include <condition_variable>
#include <functional>
#include <kiwi/model.hpp>
#include <kiwi/notifier.hpp>
#include <mutex>
#include <thread>

#include "base/clock.hpp"
#include "base/duration.hpp"
#include "base/log.hpp"
#include "plugin/plugin_loader.hpp"
#include "store/store.hpp"

namespace kiwi::agent {

struct NotifierSpec {
  std::string name;
  std::string kind;                 // as configured ("ntfy", or a path)
  std::vector<std::string> alerts;  // rule names, `*` globs; empty: all
  Severity min_severity = Severity::info;
  Millis repeat_interval{0};
  std::string host;       // the `instance` label
  std::string agent_url;  // the dashboard's address, for links ("" when unknown)
  PluginInstance<Notifier> instance;
};

// The repeat interval of a [[notify]] without one.
Millis default_repeat_interval(std::string_view kind);
// Transitions per notification at most.
inline constexpr std::size_t kNotifyBatch = 64;

class NotifyRunner {
 public:
  // `firing`: the alerts firing now (the engine's list, any thread). `acked`: called after the
  // cursor moves (the owner forgets transitions every notifier has). `clock` outlives the runner.
  NotifyRunner(NotifierSpec spec, Store& store, std::function<std::vector<Alert>()> firing,
               std::function<void()> acked, Logger& log, Clock& clock = real_clock());
  ~NotifyRunner();  // stop()
  NotifyRunner(const NotifyRunner&) = delete;
  NotifyRunner& operator=(const NotifyRunner&) = delete;

  void start();
  void stop();  // wakes the thread and joins it (a send in progress finishes: its own timeout)

  enum class Step { idle, sent, more, dropped, retry };
  // One batch of transitions, or a repeat when one is due. Only while the thread is not running.
  Step step();

  NotifierStatus status() const;
  std::uint64_t acked() const;  // any thread
  const std::string& name() const { return spec_.name; }

 private:
  void run();
  bool wanted(const std::string& rule, Severity s) const;
  WriteResult send(Notification& n);

  NotifierSpec spec_;
  Store& store_;
  std::function<std::vector<Alert>()> firing_;
  std::function<void()> on_acked_;
  Logger& log_;
  Clock& clock_;
  std::atomic<std::uint64_t> acked_{0};
  bool send_firing_now_ = false;  // no cursor yet: the alerts firing now go first
  std::int64_t next_repeat_ms_ = 0;
  int failures_in_row_ = 0;

  mutable std::mutex status_mutex_;
  NotifierStatus status_;

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kiwi::agent
