// The collector: one thread that ticks on a steady clock aligned to the interval, has the sensors
// that are due sampled by a small pool of sampler threads under a deadline each, and hands one
// timestamped sample to the store and the snapshot.
//
// Threads:
//   - the collector thread ("kiwi-collector") runs the schedule, the ticks, reconfiguration and
//     the heartbeat; it alone touches the store's writer side, the snapshot and the logger;
//   - the samplers ("kiwi-sampler", sampler_pool.hpp) take the sensors a tick posts, in order,
//     and call their sample(), and destroy retired instances; nothing else.
//
// Its jobs, each in its own files: the schedule (schedule.hpp), the sampler pool
// (sampler_pool.hpp), report assembly (report.hpp) and the store's cadence (store_cadence.hpp);
// this class wires them, and publishes the snapshot.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <kiwi/model.hpp>
#include <memory>
#include <mutex>
#include <thread>

#include "base/clock.hpp"
#include "collect/report.hpp"
#include "collect/sampler_pool.hpp"
#include "collect/schedule.hpp"
#include "collect/self_report.hpp"
#include "collect/settings.hpp"
#include "collect/snapshot.hpp"
#include "collect/store_cadence.hpp"
#include "plugin/plugin_loader.hpp"
#include "store/store.hpp"

namespace kiwi::agent {

class Collector {
 public:
  // Takes the sensors and starts the first sampler thread (idle until the first tick). Every spec
  // needs an instance; throws std::invalid_argument otherwise. `clock` is the time of everything
  // it does (the schedule, the deadlines, the stamps; a FakeClock in tests); it outlives the
  // collector.
  Collector(CollectorSettings settings, std::vector<SensorSpec> sensors, Store& store,
            SnapshotHolder& snapshot, Logger& log, Clock& clock = real_clock());
  // stop(), if not done yet.
  ~Collector();
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  // Takes one sample now, stamped with the nearest interval boundary. Only while the collector
  // thread is not running (tests; start() takes the first tick itself).
  void tick_now();
  // Takes one sample as tick number `tick_index` of the schedule, stamped tick_index x interval (a
  // stamp not after the last one taken becomes the next grid point). A sensor with an interval of
  // n ticks is due when the number is a multiple of n, and on its first tick. Returns within
  // about half an interval whatever the sensors do (the publish budget). Only while the collector
  // thread is not running.
  void tick(std::int64_t tick_index);
  // One of the agent's own reports (self_report.hpp): its telemetry (`name` kAgentReport), the
  // alerts (kAlertsReport). Read at every tick after the sensors, in the order given, each seeing
  // the reports before it, and added to the snapshot last; its families are its alone. `report`
  // outlives the collector. Only before start().
  void report_self(std::string_view name, SelfReport& report);
  // Starts the collector thread: its first tick is taken at once (stamped with the nearest
  // interval boundary), then one on every boundary after. Does not wait for that first tick.
  void start();
  // Applied between ticks (by the collector thread once started, else at once by the caller);
  // returns once applied, waiting at most for the tick in progress, never for a stuck sensor.
  // Sensors not named in `sensors`, and running ones given a new instance, are retired: an idle
  // one is destroyed on a sampler before this returns, one in a call by its sampler when the call
  // returns. A spec without an instance whose name is not running is skipped and logged. Ignored
  // after stop().
  void reconfigure(CollectorSettings settings, std::vector<SensorSpec> sensors);
  // Stops the collector thread (the tick in progress finishes), then gives every sensor (running
  // and retiring) at most 2 s in all to return from its call and be destroyed on a sampler; the
  // samplers are joined, except those still in a call, which are abandoned (thread detached,
  // instance deliberately leaked so that its library stays loaded; logged). Then commits what is
  // queued. Idempotent.
  void stop();

  // Sensors abandoned by stop() (their threads still in a call, or in the sensor's destructor).
  std::size_t abandoned() const { return abandoned_.load(); }
  const CollectorStats& stats() const { return stats_; }
  std::string store_last_error() const { return store_cadence_.last_error(); }
  std::string snapshot_file_last_error() const {
    std::lock_guard lock(error_mutex_);
    return snapshot_file_last_error_;
  }

  // stop(): how long sensors get to return.
  static constexpr Millis kStopGrace = SamplerPool::kStopGrace;
  static constexpr Millis kStopRetryDelay{500};  // stop(): a failed last commit, tried again
  // How long a sensor's call may hold up the sensors queued after it (sampler_pool.hpp).
  static constexpr Millis kHandOffAfter = SamplerPool::kHandOffAfter;

 private:
  struct ScheduledSensor;
  struct Pending {
    CollectorSettings settings;
    std::vector<SensorSpec> sensors;
  };
  void run();
  ScheduledSensor make_sensor(SensorSpec spec);
  void apply(Pending p);
  void retire(std::vector<ScheduledSensor*> gone);
  void sample(const TickSchedule::Tick& tick);
  void look_at(ScheduledSensor& sensor, std::int64_t ts_ms);
  void time_out(ScheduledSensor& sensor, std::int64_t ts_ms);
  struct Self;
  void read_self(Self& self, const Snapshot& tick, std::int64_t ts_ms);
  void publish(std::shared_ptr<Snapshot> snap);

  CollectorSettings settings_;
  Clock& clock_;
  TickSchedule schedule_;
  SamplerPool pool_;
  std::vector<ScheduledSensor>
      sensors_;  // collector thread only (or the caller of tick() before start())
  struct Self {
    SelfReport* report;
    ReportKeeper keeper;
  };
  std::deque<Self> selves_;
  std::shared_ptr<const Snapshot> last_published_;
  SnapshotHolder& snapshot_;
  Logger& log_;
  SeriesRegistry series_;  // who writes which series
  CollectorStats stats_;
  StoreCadence store_cadence_;  // after stats_, which it counts in
  std::atomic<std::size_t> abandoned_{0};
  std::uint64_t sequence_ = 0;
  mutable std::mutex error_mutex_;
  std::string snapshot_file_last_error_;

  // The collector thread's mailbox: stop and reconfigure requests.
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable applied_;
  std::deque<Pending> pending_;
  std::uint64_t requested_ = 0, applied_count_ = 0;  // reconfigure requests posted, applied
  bool running_ = false;
  bool stopping_ = false;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace kiwi::agent
