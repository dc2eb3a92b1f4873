#include "collect/collector.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>

#include "base/duration.hpp"
#include "base/thread_name.hpp"

namespace kiwi::agent {

namespace {

using SteadyTime = Clock::SteadyTime;

}  // namespace

// Where a sensor's latest call stands with the collector.
enum class CallStatus {
  in_time,    // waited for until its deadline, when one is in progress
  timed_out,  // reported timed out and not returned yet: not waited for, not called again
};

// One sensor as the collector sees it (collector thread only).
struct Collector::ScheduledSensor {
  ScheduledSensor(std::string name, std::string plugin)
      : keeper(std::move(name), std::move(plugin)) {}
  std::shared_ptr<SensorJob> job;
  ReportKeeper keeper;  // its report: name, plugin, counters
  std::int64_t every_ticks = 1;
  Millis timeout{0};  // 0: every_ticks x interval
  CallStatus call = CallStatus::in_time;
  // The stamp of the tick its latest reading went into; INT64_MIN before the first (it is due at
  // every tick until it has one, whatever its every_ticks).
  std::int64_t read_at_ms = INT64_MIN;
  std::optional<CallOutcome> got;  // taken from the job, not yet looked at

  Millis timeout_of(Millis interval) const {
    return sensor_timeout(timeout, every_ticks, interval);
  }
};

Collector::Collector(CollectorSettings settings, std::vector<SensorSpec> sensors, Store& store,
                     SnapshotHolder& snapshot, Logger& log, Clock& clock)
    : settings_(std::move(settings)),
      clock_(clock),
      schedule_(clock),
      pool_(clock, log),
      snapshot_(snapshot),
      log_(log),
      series_(settings_.max_series_per_sensor),
      store_cadence_(store, log, stats_) {
  for (auto& s : sensors)
    if (!s.instance.object)
      throw std::invalid_argument("collector: sensor " + s.name + " has no instance");
  for (auto& s : sensors) sensors_.push_back(make_sensor(std::move(s)));
  pool_.start();
}

Collector::~Collector() {
  stop();
}

Collector::ScheduledSensor Collector::make_sensor(SensorSpec spec) {
  ScheduledSensor sensor(spec.name, spec.plugin);
  sensor.every_ticks = std::max<std::int64_t>(1, spec.every_ticks);
  sensor.timeout = spec.timeout;
  sensor.keeper.set_labels(std::move(spec.labels));
  std::string activity = "sensor " + spec.name + " (" +
                         (spec.instance.library ? spec.instance.library->file : spec.plugin) + ")";
  sensor.job = std::make_shared<SensorJob>(std::move(spec.name), std::move(activity),
                                           std::move(spec.instance), settings_.procfs);
  return sensor;
}

void Collector::report_self(std::string_view name, SelfReport& report) {
  selves_.push_back({&report, ReportKeeper{std::string(name), std::string(name)}});
  series_.reserve(series_.owner(name), report.metrics());
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
  series_.set_limit(settings_.max_series_per_sensor);
  std::vector<ScheduledSensor> next;
  next.reserve(p.sensors.size());
  for (auto& spec : p.sensors) {
    auto running = std::find_if(sensors_.begin(), sensors_.end(), [&](const ScheduledSensor& s) {
      return s.job && s.keeper.name() == spec.name;
    });
    if (spec.instance.object) {
      // A new instance; the running one of this name (if any) stays in sensors_ and is retired.
      next.push_back(make_sensor(std::move(spec)));
    } else if (running == sensors_.end()) {
      log_.error("sensor " + spec.name +
                 ": not running and no instance given to the collector; left out");
    } else {
      // Unchanged: the same instance, state and counters.
      ScheduledSensor kept = std::move(*running);
      running->job = nullptr;
      kept.every_ticks = std::max<std::int64_t>(1, spec.every_ticks);
      kept.timeout = spec.timeout;
      // New labels make new series: the old ones are free for others.
      if (kept.keeper.labels() != spec.labels) series_.release(series_.owner(spec.name));
      kept.keeper.set_labels(std::move(spec.labels));
      next.push_back(std::move(kept));
    }
  }
  std::vector<ScheduledSensor*> gone;
  for (auto& s : sensors_)
    if (s.job) gone.push_back(&s);
  // A sensor no longer configured leaves its series to others; one given a new instance keeps
  // them (its name is its identity).
  for (ScheduledSensor* s : gone)
    if (std::none_of(next.begin(), next.end(),
                     [&](auto& n) { return n.keeper.name() == s->keeper.name(); }))
      series_.release(series_.owner(s->keeper.name()));
  retire(std::move(gone));
  sensors_ = std::move(next);
}

// Idle ones are destroyed on a sampler now, and waited for (as long as their destructors take);
// those in a call (or queued behind one) are destroyed by their sampler when it gets to them.
void Collector::retire(std::vector<ScheduledSensor*> gone) {
  std::vector<std::shared_ptr<SensorJob>> jobs;
  for (ScheduledSensor* s : gone) jobs.push_back(std::move(s->job));
  pool_.retire(std::move(jobs));
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
  std::vector<std::shared_ptr<SensorJob>> jobs;
  for (auto& s : sensors_)
    if (s.job) jobs.push_back(std::move(s.job));
  abandoned_ += pool_.shut_down(std::move(jobs));
  const std::int64_t now_ms = schedule_.last_stamp() == INT64_MIN ? 0 : schedule_.last_stamp();
  store_cadence_.finish(now_ms, settings_, kStopRetryDelay, clock_);
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
    std::uint64_t missed = 0;
    const std::int64_t due = schedule_.due_index(settings_.interval, missed);
    stats_.missed_ticks += missed;
    tick(due);
    lock.lock();
    stats_.missed_ticks += schedule_.advance(settings_.interval);
  }
}

void Collector::tick(std::int64_t number) {
  const TickSchedule::Tick tick = schedule_.take(number, settings_.interval);
  pool_.reap_retired();
  sample(tick);
  ++stats_.ticks;
  SnapshotAssembly assembly(++sequence_, tick.ts_ms, settings_, last_published_.get(),
                            sensors_.size() + selves_.size());
  std::vector<const MetricValue*> fresh;  // to the store
  for (auto& s : sensors_) assembly.add(s.keeper, fresh);
  for (Self& self : selves_) {
    read_self(self, assembly.so_far(), tick.ts_ms);
    assembly.add(self.keeper, fresh);
  }
  std::shared_ptr<Snapshot> snap = assembly.finish();
  store_cadence_.append(tick.ts_ms, fresh, settings_);
  publish(std::move(snap));
}

// A tick's round of calls: what came back since the last tick is read; every sensor that is due
// and idle is queued; all are waited for until the last one is done, or each one's deadline, or
// the publish budget; what is still in a call past its deadline then has timed out.
void Collector::sample(const TickSchedule::Tick& tick) {
  const auto started = clock_.steady_now();
  // The tick publishes by then, with what has arrived.
  const auto publish_by = started + settings_.interval / 2;
  auto lock = pool_.lock();
  for (auto& s : sensors_) s.got = pool_.take_outcome(lock, *s.job);
  lock.unlock();
  for (auto& s : sensors_) look_at(s, tick.ts_ms);
  lock.lock();
  // A sensor still in a call (from an earlier tick) is waited for too, until its own deadline,
  // unless it has timed out already.
  for (auto& s : sensors_) {
    SensorJob& job = *s.job;
    if (job.state() == JobState::done) {  // came back just now: next tick
    } else if (job.busy()) {
      if (s.call == CallStatus::in_time) pool_.await(lock, job);
    } else if (s.read_at_ms == tick.ts_ms) {
      // Its late reading is this tick's: posted again at its next due tick, so that a reading
      // is never stamped a whole tick after it was taken.
    } else if (tick.index % s.every_ticks == 0 || s.read_at_ms == INT64_MIN) {
      pool_.post(lock, s.job, started, s.timeout_of(settings_.interval));
    }
  }
  pool_.wait_for_round(lock, publish_by);
  pool_.end_round(lock);
  // Not waited for any more; what is still in a call past its deadline has timed out.
  const auto now = clock_.steady_now();
  std::vector<ScheduledSensor*> overdue;
  for (auto& s : sensors_) {
    SensorJob& job = *s.job;
    if (job.state() == JobState::done)
      s.got = pool_.take_outcome(lock, job);
    else if (job.busy() && s.call == CallStatus::in_time && now >= job.deadline())
      overdue.push_back(&s);
  }
  lock.unlock();
  for (auto& s : sensors_) look_at(s, tick.ts_ms);
  for (ScheduledSensor* s : overdue) time_out(*s, tick.ts_ms);
}

// A reading that came back, if one did: this tick's report, or (after its deadline) the end of a
// time-out.
void Collector::look_at(ScheduledSensor& s, std::int64_t ts_ms) {
  if (!s.got) return;
  CallOutcome o = std::move(*s.got);
  s.got.reset();
  if (s.call == CallStatus::in_time && o.finished - o.started > s.timeout_of(settings_.interval))
    time_out(s, ts_ms);
  if (s.call == CallStatus::timed_out) {
    s.keeper.came_back(o.finished - o.started, log_);
    s.call = CallStatus::in_time;
    return;
  }
  const double took = std::chrono::duration<double>(o.finished - o.started).count();
  s.keeper.read(std::move(o), took, ts_ms, series_, log_);
  s.read_at_ms = ts_ms;
}

// A call past its deadline: reported once; the sensor is not called again until it returns.
void Collector::time_out(ScheduledSensor& s, std::int64_t ts_ms) {
  s.keeper.time_out(s.timeout_of(settings_.interval), ts_ms, log_);
  s.call = CallStatus::timed_out;
}

// The agent's own report of this tick, read as a sensor's is: checked, then kept.
void Collector::read_self(Self& self, const Snapshot& tick, std::int64_t ts_ms) {
  const auto started = clock_.steady_now();
  SampleCall call =
      call_checked([&](MetricSink& sink) { return self.report->sample(tick, sink); }, nullptr);
  const double took = std::chrono::duration<double>(clock_.steady_now() - started).count();
  self.keeper.read(std::move(call), took, ts_ms, series_, log_);
}

// The tick's snapshot, to the HTTP workers and the snapshot file.
void Collector::publish(std::shared_ptr<Snapshot> snap) {
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
}

}  // namespace kiwi::agent
