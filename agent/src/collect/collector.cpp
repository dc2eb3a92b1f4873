#include "collect/collector.hpp"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>

#include "base/duration.hpp"
#include "base/fatal_signal.hpp"
#include "plugin/metric_check.hpp"
#include "plugin/rates.hpp"

namespace kiwi::agent {

namespace {

using SteadyTime = Clock::SteadyTime;

// Thread names are at most 15 bytes (pthread_setname_np refuses longer ones).
void name_this_thread(std::string name) {
  if (name.size() > 15) name.resize(15);
  pthread_setname_np(pthread_self(), name.c_str());
}

// An abandoned sensor's instance: kept, never destroyed, so the code of a library whose sample()
// may still run is never unloaded (c_abi.hpp, keep_forever).
void keep_instance_forever(PluginInstance<Sensor> instance) {
  keep_forever(std::make_shared<PluginInstance<Sensor>>(std::move(instance)));
}

}  // namespace

// What one sample() call gave: made on a sampler, read by the collector.
struct Collector::Outcome : SampleCall {
  SteadyTime posted, started, finished;  // posted: when the collector asked
};

// One sensor's side of the hand-off to the samplers. Everything but `name`, `activity`, `uptime`
// and `rates` is guarded by hub->mutex; `instance`, `uptime` and `rates` are used by the sampler
// in its call alone, except that stop() takes the instance of an abandoned one.
struct Collector::Worker {
  std::string name;
  std::string activity;  // "sensor <name> (<plugin file>)", named by a crash in sample()
  PluginInstance<Sensor> instance;
  KeptFile uptime;    // <procfs>/uptime, the clock of the sensor's rates; the sampler's, in a call
  RateDeriver rates;  // the sampler's, in a call

  explicit Worker(const std::string& procfs) : uptime(join_path(procfs, "uptime")) {}

  bool requested = false;  // in the job queue, to be sampled (or destroyed, with `exit`)
  bool in_call = false;    // in sample()
  bool done = false;       // `outcome` is ready for the collector
  bool awaited = false;    // counted in hub->awaited
  bool exit = false;       // retired or stopping: destroy it instead of sampling it again
  bool abandoned = false;  // stop() gave up on it; it has its instance no more
  bool exited = false;     // its instance is destroyed
  SteadyTime posted;       // when the collector queued it
  Millis timeout{0};       // its call's, as of then
  // When its call times out: the call's start plus `timeout` (posted plus `timeout` until it
  // starts), so a sensor queued behind others has its whole timeout. The sink hands it on.
  SteadyTime deadline;
  Outcome outcome;

  bool busy() const { return requested || in_call; }

  // The metric check and the rates (call_sensor) only touch `out` and the sensor's own
  // RateDeriver, so they run here, on the sampler. `until` is the instant the collector times
  // this call out at (MetricSink::deadline()). `sensor` is the instance's object, taken under the
  // hub lock (stop() may take the instance of an abandoned call meanwhile).
  void call(Sensor& sensor, Outcome& out, SteadyTime started, SteadyTime until,
            const Clock& clock) {
    CurrentActivity running(activity.c_str());
    out.started = started;
    static_cast<SampleCall&>(out) = call_sensor(sensor, rates, uptime, until);
    out.finished = clock.steady_now();
  }
};

// A thread of the pool. Guarded by hub->mutex, but `thread`, which the collector alone touches.
struct Collector::Sampler {
  std::thread thread;
  Worker* current = nullptr;  // the sensor it calls or destroys now
  SteadyTime since;
  bool handed_off = false;  // the collector gave the queue to another sampler meanwhile
  bool exited = false;
};

// The lock every sensor and sampler shares with the collector, the job queue and the pool.
struct Collector::Hub {
  explicit Hub(Clock& c) : clock(c) {}
  Clock& clock;
  std::mutex mutex;
  std::condition_variable cv;    // to the collector: the last awaited reading, or a sensor gone
  std::condition_variable work;  // to the samplers: a job, or closing
  std::deque<std::shared_ptr<Worker>> jobs;  // sensors to sample, or to destroy (exit)
  std::vector<std::shared_ptr<Sampler>> samplers;
  int awaited = 0;       // sensors the tick in progress still waits for
  int idle = 0;          // samplers waiting for a job
  bool closing = false;  // stop(): samplers exit once the queue is empty

  // A sampler's life: the next job, in order, until closing and none is left.
  static void run(std::shared_ptr<Hub> hub, std::shared_ptr<Sampler> self) {
    name_this_thread("kiwi-sampler");
    std::unique_lock lock(hub->mutex);
    for (;;) {
      if (hub->jobs.empty()) {
        if (hub->closing) break;
        ++hub->idle;
        hub->work.wait(lock, [&] { return !hub->jobs.empty() || hub->closing; });
        --hub->idle;
        continue;
      }
      std::shared_ptr<Worker> w = std::move(hub->jobs.front());
      hub->jobs.pop_front();
      w->requested = false;
      self->current = w.get();
      self->since = hub->clock.steady_now();
      if (!w->exit) {
        w->in_call = true;
        w->deadline = self->since + w->timeout;
        Sensor& sensor = *w->instance.object;
        Outcome out;
        out.posted = w->posted;
        const SteadyTime started = self->since, until = w->deadline;
        lock.unlock();
        w->call(sensor, out, started, until, hub->clock);
        lock.lock();
        w->in_call = false;
        if (!w->abandoned && !w->exit) {
          w->outcome = std::move(out);
          w->done = true;
          if (w->awaited) {
            w->awaited = false;
            if (--hub->awaited == 0) hub->cv.notify_all();  // one wakeup per tick
          }
        }
      }
      // Retired (before or during its call) or stopping: the instance goes here, object first,
      // then its library. An abandoned one's instance is stop()'s: not touched.
      if (w->exit && !w->abandoned && !w->exited) {
        {
          CurrentActivity destroying(w->activity.c_str());  // the plugin's destructor runs here
          PluginInstance<Sensor> dying = std::move(w->instance);
          lock.unlock();
        }
        lock.lock();
        w->exited = true;
        hub->cv.notify_all();
      }
      self->current = nullptr;
      if (self->handed_off) {
        self->handed_off = false;
        name_this_thread("kiwi-sampler");
      }
    }
    self->exited = true;
    lock.unlock();
    hub->cv.notify_all();
  }
};

// One sensor as the collector sees it (collector thread only).
struct Collector::Slot {
  Slot(std::string name, std::string plugin) : keeper(std::move(name), std::move(plugin)) {}
  std::shared_ptr<Worker> worker;
  ReportKeeper keeper;  // its report: name, plugin, counters
  std::int64_t every_ticks = 1;
  Millis timeout{0};
  bool read_before = false;
  bool timed_out = false;       // reported timed out; its call has not returned yet
  std::optional<Outcome> got;   // taken from the worker, not yet looked at
  bool read_this_tick = false;  // a reading arrived this tick
};

Collector::Collector(CollectorSettings settings, std::vector<SensorSpec> sensors, Store& store,
                     SnapshotHolder& snapshot, Logger& log, Clock& clock)
    : settings_(std::move(settings)),
      clock_(clock),
      schedule_(clock),
      hub_(std::make_shared<Hub>(clock)),
      snapshot_(snapshot),
      log_(log),
      store_cadence_(store, log, stats_) {
  for (auto& s : sensors)
    if (!s.instance.object)
      throw std::invalid_argument("collector: sensor " + s.name + " has no instance");
  for (auto& s : sensors) sensors_.push_back(make_slot(std::move(s)));
  // The first sampler now, not in the first tick (which then needs only to wake it).
  std::unique_lock lock(hub_->mutex);
  start_sampler();
}

Collector::~Collector() {
  stop();
}

Collector::Slot Collector::make_slot(SensorSpec spec) {
  Slot slot(spec.name, spec.plugin);
  slot.every_ticks = std::max<std::int64_t>(1, spec.every_ticks);
  slot.timeout = spec.timeout;
  auto worker = std::make_shared<Worker>(settings_.procfs);
  worker->name = std::move(spec.name);
  worker->activity = "sensor " + worker->name + " (" +
                     (spec.instance.library ? spec.instance.library->file : spec.plugin) + ")";
  worker->instance = std::move(spec.instance);
  slot.worker = std::move(worker);
  return slot;
}

// Sees that the job queue is served (hub lock held): by an idle sampler (woken), or by one in a
// call that began less than kHandOffAfter ago, or else by a new one. A sampler past that is
// handed off: renamed after its sensor until the call returns, no longer counted on. Returns
// when to look again: while jobs wait, within kHandOffAfter; else time_point::max().
SteadyTime Collector::hand_off(std::unique_lock<std::mutex>&) {
  Hub& hub = *hub_;
  if (hub.jobs.empty()) return SteadyTime::max();
  const auto now = clock_.steady_now();
  auto next = now + kHandOffAfter;
  if (hub.idle > 0) {
    hub.work.notify_one();
    return next;
  }
  bool served = false;
  for (auto& s : hub.samplers) {
    if (s->exited || s->handed_off) continue;
    if (!s->current) {  // starting, or between two jobs: it takes the next one
      served = true;
    } else if (now < s->since + kHandOffAfter) {
      served = true;
      next = std::min(next, s->since + kHandOffAfter);
    } else {
      s->handed_off = true;
      std::string name = "kiwi-s:" + s->current->name;  // `top -H` names the slow sensor
      name.resize(std::min<std::size_t>(name.size(), 15));
      pthread_setname_np(s->thread.native_handle(), name.c_str());
    }
  }
  if (!served) start_sampler();
  return next;
}

// Adds a sampler to the pool (hub lock held).
void Collector::start_sampler() {
  auto sampler = std::make_shared<Sampler>();
  sampler->thread = std::thread(&Hub::run, hub_, sampler);
  hub_->samplers.push_back(std::move(sampler));
}

// Waits on hub->cv until `done()` or `until`, handing the queue off as calls run long. The hub
// lock is held on entry and on return; returns done().
template <class Done>
bool Collector::wait_for_samplers(std::unique_lock<std::mutex>& lock, SteadyTime until, Done done) {
  while (!done()) {
    const auto look_again = hand_off(lock);
    if (clock_.steady_now() >= until) return false;
    clock_.wait_until(hub_->cv, lock, std::min(until, look_again));
  }
  return true;
}

void Collector::tick_now() {
  tick(schedule_.nearest_tick(settings_.interval));
}

void Collector::start() {
  std::lock_guard lock(mutex_);
  if (running_ || stopped_) return;
  running_ = true;
  thread_ = std::thread([this] { run(); });
}

void Collector::reconfigure(CollectorSettings settings, std::vector<SensorSpec> sensors) {
  std::unique_lock lock(mutex_);
  if (stopped_) return;
  if (!running_) {  // no collector thread: nobody else touches the sensors
    lock.unlock();
    apply({std::move(settings), std::move(sensors)});
    return;
  }
  pending_.push_back({std::move(settings), std::move(sensors)});
  const std::uint64_t mine = ++requested_;
  lock.unlock();
  wake_.notify_all();
  lock.lock();
  applied_.wait(lock, [&] { return applied_count_ >= mine || !running_; });
}

void Collector::apply(Pending p) {
  settings_ = std::move(p.settings);
  std::vector<Slot> next;
  next.reserve(p.sensors.size());
  for (auto& spec : p.sensors) {
    auto running = std::find_if(sensors_.begin(), sensors_.end(), [&](const Slot& s) {
      return s.worker && s.keeper.name() == spec.name;
    });
    if (spec.instance.object) {
      // A new instance; the running one of this name (if any) stays in sensors_ and is retired.
      next.push_back(make_slot(std::move(spec)));
    } else if (running == sensors_.end()) {
      log_.error("sensor " + spec.name +
                 ": not running and no instance given to the collector; left out");
    } else {
      // Unchanged: the same instance, state and counters.
      Slot kept = std::move(*running);
      running->worker = nullptr;
      kept.every_ticks = std::max<std::int64_t>(1, spec.every_ticks);
      kept.timeout = spec.timeout;
      next.push_back(std::move(kept));
    }
  }
  std::vector<Slot*> gone;
  for (auto& s : sensors_)
    if (s.worker) gone.push_back(&s);
  retire(std::move(gone));
  sensors_ = std::move(next);
}

// Idle ones are destroyed on a sampler now, and waited for (as long as their destructors take);
// those in a call (or queued behind one) are destroyed by their sampler when it gets to them.
void Collector::retire(std::vector<Slot*> slots) {
  if (slots.empty()) return;
  std::vector<std::shared_ptr<Worker>> now;
  std::unique_lock lock(hub_->mutex);
  for (Slot* s : slots) {
    std::shared_ptr<Worker> w = std::move(s->worker);
    w->exit = true;
    if (w->busy()) {
      retiring_.push_back(std::move(w));
    } else {
      w->requested = true;
      hub_->jobs.push_back(w);
      now.push_back(std::move(w));
    }
  }
  wait_for_samplers(lock, SteadyTime::max(), [&] {
    return std::all_of(now.begin(), now.end(), [](auto& w) { return w->exited; });
  });
}

void Collector::reap_retiring() {
  if (retiring_.empty()) return;
  std::lock_guard lock(hub_->mutex);
  std::erase_if(retiring_, [](const std::shared_ptr<Worker>& w) { return w->exited; });
}

void Collector::shut_down_workers() {
  std::vector<std::shared_ptr<Worker>> all;
  for (auto& s : sensors_)
    if (s.worker) all.push_back(std::move(s.worker));
  for (auto& w : retiring_) all.push_back(std::move(w));
  retiring_.clear();
  std::vector<std::shared_ptr<Sampler>> samplers;
  std::vector<std::string> abandoned;
  {
    std::unique_lock lock(hub_->mutex);
    hub_->closing = true;
    for (auto& w : all) {
      w->exit = true;
      if (!w->busy()) {
        w->requested = true;
        hub_->jobs.push_back(w);
      }
    }
    hub_->work.notify_all();
    // One bound for all of them: SIGTERM never waits longer for a sensor.
    wait_for_samplers(lock, clock_.steady_now() + kStopGrace, [&] {
      return std::all_of(all.begin(), all.end(), [](auto& w) { return w->exited; }) &&
             std::all_of(hub_->samplers.begin(), hub_->samplers.end(),
                         [](auto& s) { return s->exited; });
    });
    for (auto& w : all) {
      if (w->exited) continue;
      w->abandoned = true;
      if (w->in_call) {
        keep_instance_forever(std::move(w->instance));
        abandoned.push_back("sensor " + w->name +
                            " abandoned: its sample() has not returned after " +
                            format_duration(kStopGrace) + "; its library stays loaded");
      } else {
        abandoned.push_back("sensor " + w->name + " abandoned: its thread has not finished after " +
                            format_duration(kStopGrace) + " (in the sensor's destructor)");
      }
      ++abandoned_;
    }
    hub_->jobs.clear();
    samplers = hub_->samplers;
  }
  // A sampler still in a call (or a destructor) goes on alone, holding what it uses.
  for (auto& s : samplers) {
    bool exited;
    {
      std::lock_guard lock(hub_->mutex);
      exited = s->exited;
    }
    if (exited)
      s->thread.join();
    else
      s->thread.detach();
  }
  for (auto& line : abandoned) log_.warn(line);
}

void Collector::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    stopping_ = stopped_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::deque<Pending> unapplied;
  {
    std::lock_guard lock(mutex_);
    running_ = false;
    unapplied.swap(pending_);
  }
  applied_.notify_all();  // a reconfigure() still waiting returns (nothing more is applied)
  unapplied.clear();
  shut_down_workers();
  const std::int64_t now_ms = schedule_.last_stamp() == INT64_MIN ? 0 : schedule_.last_stamp();
  store_cadence_.finish(now_ms, settings_.retention, kStopRetryDelay, clock_);
}

void Collector::run() {
  name_this_thread("kiwi-collector");
  // The heartbeat comes from this loop alone, between ticks: a tick that never returns (a stuck
  // disk) stops it, and systemd's watchdog restarts the agent. A stuck sensor does not: the tick
  // publishes without it.
  auto beats = [&] { return settings_.heartbeat && settings_.heartbeat_every.count() > 0; };
  auto next_beat = clock_.steady_now();
  auto beat = [&] {
    if (!beats() || clock_.steady_now() < next_beat) return;
    settings_.heartbeat();
    next_beat = clock_.steady_now() + settings_.heartbeat_every;
  };
  beat();
  tick(schedule_.nearest_tick(settings_.interval));  // at once: the first request soon has data
  schedule_.align(settings_.interval);
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (!pending_.empty()) {
      Pending p = std::move(pending_.front());
      pending_.pop_front();
      lock.unlock();
      apply(std::move(p));
      schedule_.align(settings_.interval);  // on the new grid: its first point after the latest
      lock.lock();
      ++applied_count_;
      applied_.notify_all();
      continue;
    }
    lock.unlock();
    beat();
    lock.lock();
    const SteadyTime next = schedule_.next_due();
    auto until = beats() ? std::min(next, next_beat) : next;
    if (clock_.wait_until(wake_, lock, until, [&] { return stopping_ || !pending_.empty(); }))
      continue;
    if (clock_.steady_now() < next) continue;  // woken for the heartbeat
    lock.unlock();
    tick(schedule_.due_index(settings_.interval));
    lock.lock();
    stats_.missed_ticks += schedule_.advance(settings_.interval);
  }
}

void Collector::tick(std::int64_t number) {
  const auto [tick_index, ts_ms] = schedule_.take(number, settings_.interval);
  const auto started = clock_.steady_now();
  // The tick publishes by then, with what has arrived.
  const auto publish_by = started + settings_.interval / 2;
  reap_retiring();

  auto timeout_of = [&](const Slot& s) {
    return s.timeout.count() > 0 ? s.timeout : s.every_ticks * settings_.interval;
  };
  auto take = [](Slot& s, Worker& w) {
    s.got = std::move(w.outcome);
    w.outcome = {};
    w.done = false;
  };
  // A reading that came back (after its deadline: a time-out that has already ended).
  auto look_at = [&](Slot& s) {
    if (!s.got) return;
    Outcome o = std::move(*s.got);
    s.got.reset();
    const Millis limit = timeout_of(s);
    if (!s.timed_out && o.finished - o.started > limit) time_out(s, ts_ms, limit);
    if (s.timed_out) {
      s.keeper.came_back(o.finished - o.started, log_);
      s.timed_out = false;
      return;
    }
    read(s, std::move(o), ts_ms);
  };

  // Queue every sensor that is due and idle; a sensor still in a call (from an earlier tick) is
  // waited for too, until its own deadline, unless it has timed out already.
  std::unique_lock lock(hub_->mutex);
  for (auto& s : sensors_) {
    s.read_this_tick = false;
    Worker& w = *s.worker;
    if (w.done) take(s, w);
  }
  lock.unlock();
  for (auto& s : sensors_) look_at(s);
  lock.lock();
  int awaited = 0;
  for (auto& s : sensors_) {
    Worker& w = *s.worker;
    if (w.done) {  // came back just now: next tick
    } else if (w.busy()) {
      if (!s.timed_out) {
        w.awaited = true;
        ++awaited;
      }
    } else if (s.read_this_tick) {
      // Its late reading is this tick's: posted again at its next due tick, so that a reading
      // is never stamped a whole tick after it was taken.
    } else if (tick_index % s.every_ticks == 0 || !s.read_before) {
      w.requested = true;
      w.posted = started;
      w.timeout = timeout_of(s);
      w.deadline = started + w.timeout;
      w.awaited = true;
      ++awaited;
      hub_->jobs.push_back(s.worker);
    }
  }
  hub_->awaited = awaited;

  // Wait for them: until the last one is done, or each one's deadline, or the publish budget.
  while (hub_->awaited > 0) {
    auto until = publish_by;
    for (auto& s : sensors_)
      if (s.worker->awaited) until = std::min(until, s.worker->deadline);
    if (wait_for_samplers(lock, until, [&] { return hub_->awaited == 0; })) break;
    const auto now = clock_.steady_now();
    if (now >= publish_by) break;
    for (auto& s : sensors_) {
      Worker& w = *s.worker;
      if (w.awaited && now >= w.deadline) {
        w.awaited = false;
        --hub_->awaited;
      }
    }
  }
  // Not waited for any more; what is still in a call past its deadline has timed out.
  const auto now = clock_.steady_now();
  std::vector<Slot*> overdue;
  for (auto& s : sensors_) {
    Worker& w = *s.worker;
    w.awaited = false;
    if (w.done)
      take(s, w);
    else if (w.busy() && !s.timed_out && now >= w.deadline)
      overdue.push_back(&s);
  }
  hub_->awaited = 0;
  lock.unlock();
  for (auto& s : sensors_) look_at(s);
  for (Slot* s : overdue) time_out(*s, ts_ms, timeout_of(*s));

  std::vector<const MetricValue*> fresh;
  for (auto& s : sensors_)
    if (s.keeper.has_fresh())
      for (auto& m : s.keeper.fresh().metrics) fresh.push_back(&m);
  store_cadence_.append(ts_ms, fresh, settings_);

  SnapshotAssembly assembly(++sequence_, ts_ms, settings_, last_published_.get(), sensors_.size());
  for (auto& s : sensors_) assembly.add(s.keeper);
  std::shared_ptr<Snapshot> snap = assembly.finish();
  if (settings_.snapshot_file) {
    try {
      // Rendered here only for the file: /api/current is rendered by its handler, on request.
      settings_.snapshot_file->write(render_snapshot_json(*snap));
      if (stats_.snapshot_file_failing.exchange(0) != 0)
        log_.info("snapshot file " + settings_.snapshot_file->path() + ": writing again");
    } catch (const std::exception& e) {
      ++stats_.snapshot_file_errors;
      {
        std::lock_guard lock(error_mutex_);
        snapshot_file_last_error_ = e.what();
      }
      // Logged when it starts failing; /api/health and /metrics show it while it lasts.
      if (stats_.snapshot_file_failing++ == 0) log_.warn(std::string("snapshot file: ") + e.what());
    }
  }
  last_published_ = snap;
  snapshot_.publish(std::move(snap));
  ++stats_.ticks;
}

// A reading that arrived in time: it is this tick's report of the sensor.
void Collector::read(Slot& s, Outcome o, std::int64_t ts_ms) {
  const double took = std::chrono::duration<double>(o.finished - o.started).count();
  s.keeper.read(std::move(o), took, ts_ms, settings_.max_series_per_sensor, log_);
  s.read_before = true;
  s.read_this_tick = true;
}

// A call past its deadline: reported once; the sensor is not called again until it returns.
void Collector::time_out(Slot& s, std::int64_t ts_ms, Millis limit) {
  s.keeper.time_out(limit, ts_ms, log_);
  s.timed_out = true;
}

}  // namespace kiwi::agent
