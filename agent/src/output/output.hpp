// Outputs ([[remote_write]]): store-and-forward from the local history. One thread per output
// ("kiwi-o:<name>") reads the samples after its cursor from the Store (committed and queued
// rows), hands one bounded batch to the output plugin, and moves the cursor when the receiver
// took it. Nothing here is shared with the collector or the HTTP workers except the Store's
// reader side and a status copy under a short mutex, so an output whose receiver hangs delays
// neither sampling nor serving.
//
// Schedule: live, one batch per `interval`. On RETRY (no connection, timeout, 5xx, 429) it waits
// backoff_delay(n) after the n-th failure in a row (1 s doubling, at most 30 s), then sends from
// the cursor again, oldest first, batch after batch without waiting until it has caught up, then
// is live again. On DROP (another 4xx) it logs the reason (the first, then at most one line a
// minute with the count), counts it and moves past the batch.
//
// Cursor: the newest tick the receiver acknowledged, per output name, in the Store
// (output_cursors). It is written with the collector's next commit, so a crash (kill -9) can send
// again what was acknowledged during the last commit interval (10 s by default), and the batch in
// flight; Prometheus takes a sample again with the same value silently. A new output starts at
// the newest tick stored (it does not send the old history).
#pragma once

#include <condition_variable>
#include <functional>
#include <kiwi/model.hpp>
#include <kiwi/output.hpp>
#include <mutex>
#include <thread>

#include "base/clock.hpp"
#include "base/duration.hpp"
#include "config/schema.hpp"
#include "plugin/plugin_loader.hpp"
#include "store/store.hpp"

namespace kiwi::agent {

struct OutputSpec {
  std::string name;
  std::string plugin;  // the plugin's descriptor name
  // The defaults are the [[remote_write]] rows' (config/schema.hpp).
  Millis interval = entry_defaults("remote_write").interval.value();
  std::vector<std::string> series;  // globs over name or key; empty: all
  std::size_t max_samples = entry_defaults("remote_write").max_samples;
  PluginInstance<Output> instance;
};

// The wait after the n-th failure in a row (n >= 1): 1 s, 2 s, 4 s, ... at most 30 s.
Millis backoff_delay(int failures);
inline constexpr Millis kBackoffFirst{1000};
inline constexpr Millis kBackoffCap{30'000};

// The batch of `ticks` for the series `wanted` accepts (by catalog index), labels sorted by
// name, points oldest first. Pure.
OutputBatch make_batch(const std::vector<Store::RawTick>& ticks, const SeriesCatalog& catalog,
                       const std::function<bool(const SeriesInfo&)>& wanted);

class OutputRunner {
 public:
  // `clock`: the wall clock of error times and of the drop log's minute, and the steady clock of
  // the schedule (a FakeClock in tests); it outlives the runner.
  OutputRunner(OutputSpec spec, Store& store, Logger& log, Clock& clock = real_clock());
  ~OutputRunner();  // stop()
  OutputRunner(const OutputRunner&) = delete;
  OutputRunner& operator=(const OutputRunner&) = delete;

  void start();
  // Wakes the thread and joins it: waits for a write in progress (the plugin's own timeout).
  void stop();

  // What one step did (for the thread's schedule, and tests).
  enum class Step { idle, sent, more, dropped, retry };
  // Reads one batch after the cursor and sends it. Only while the thread is not running.
  Step step();

  OutputStatus status() const;
  std::int64_t acked_ms() const;
  const std::string& name() const { return spec_.name; }

 private:
  void run();
  void update_backlog();
  bool wanted(const SeriesInfo& s) const;

  OutputSpec spec_;
  Store& store_;
  Logger& log_;
  Clock& clock_;
  std::int64_t acked_ = 0;  // the output thread's (or step()'s caller's)
  int failures_in_row_ = 0;
  double per_tick_ = 0;  // samples of a tick this output sends, from the latest batch
  std::int64_t last_drop_log_ms_ = INT64_MIN;
  std::uint64_t drops_unlogged_ = 0;

  mutable std::mutex status_mutex_;  // guards status_ only; held for copies, never for I/O
  OutputStatus status_;

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kiwi::agent
