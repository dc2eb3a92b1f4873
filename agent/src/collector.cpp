#include "collector.hpp"

#include "metric_check.hpp"

#include <malloc.h>
#include <kiwi/gzip.hpp>

#include <chrono>
#include <cmath>

namespace kiwi::agent {

namespace {

using std::chrono::steady_clock;
using std::chrono::system_clock;

std::int64_t wall_ms() {
  return std::chrono::duration_cast<Millis>(system_clock::now().time_since_epoch()).count();
}

// How many retention-expired rows one tick may delete: small steps keep each tick short, and
// are still far faster than one new row per tick, so a backlog drains.
constexpr int kPruneRowsPerTick = 32;
// Pruning rewrites the oldest pages and the free list, so it costs flash writes per commit no
// matter how few rows go; once a minute, in one bigger step, halves the steady-state writes.
constexpr std::int64_t kPruneEveryMs = 60'000;

}  // namespace

Collector::Collector(CollectorSettings settings, std::vector<SensorSlot> sensors, Store& store,
                     SnapshotHolder& snapshot, Logger& log)
    : settings_(std::move(settings)),
      sensors_(std::move(sensors)),
      store_(store),
      snapshot_(snapshot),
      log_(log) {}

Collector::~Collector() {
  stop();
}

// The interval boundary nearest to the wall clock now, as a tick number.
std::int64_t Collector::nearest_tick() const {
  const std::int64_t iv = settings_.interval.count();
  return (wall_ms() + iv / 2) / iv;
}

void Collector::tick_now() {
  tick(nearest_tick());
}

void Collector::start() {
  thread_ = std::thread([this] { run(); });
}

void Collector::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    stopping_ = stopped_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  store_.close_current_minute();
  // What is queued reaches the disk before the process exits (pruning as of the latest sample).
  flush_store(last_index_ == INT64_MIN ? 0 : last_index_ * settings_.interval.count());
}

void Collector::run() {
  const std::int64_t iv = settings_.interval.count();
  // The schedule goes on from the last tick taken (the one at start-up, stamped with its nearest
  // boundary): the next boundary after it, on a steady clock aligned to the wall clock once, so a
  // wall-clock step (NTP) neither bunches nor skips ticks. Started late in a second, the start-up
  // tick is stamped with the coming boundary and the first scheduled one with the boundary after.
  std::int64_t index = last_index_ == INT64_MIN ? nearest_tick() + 1 : last_index_ + 1;
  auto next = steady_clock::now() + Millis(std::max<std::int64_t>(0, index * iv - wall_ms()));
  // The heartbeat comes from this loop alone, between ticks: a tick that never returns (a hung
  // sensor, a stuck disk) stops it, and systemd's watchdog restarts the agent.
  const bool beats = settings_.heartbeat && settings_.heartbeat_every.count() > 0;
  auto next_beat = steady_clock::now();
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (beats && steady_clock::now() >= next_beat) {
      settings_.heartbeat();
      next_beat = steady_clock::now() + settings_.heartbeat_every;
    }
    if (wake_.wait_until(lock, beats ? std::min(next, next_beat) : next, [&] { return stopping_; }))
      break;
    if (steady_clock::now() < next) continue;  // woken for the heartbeat
    lock.unlock();
    // The wall clock was stepped by more than an interval: stamp by it from now on (tick() keeps
    // the stamps strictly increasing if it went back).
    if (std::int64_t wall = nearest_tick(); std::llabs(wall - index) > 1) index = wall;
    tick(index);
    lock.lock();
    // Behind schedule (a slow sensor, a suspended machine): skip to the next future boundary.
    auto now = steady_clock::now();
    ++index;
    next += settings_.interval;
    if (next <= now) {
      auto behind = (now - next) / settings_.interval + 1;
      stats_.missed_ticks += static_cast<std::uint64_t>(behind);
      index += behind;
      next += behind * settings_.interval;
    }
  }
}

void Collector::flush_store(std::int64_t now_ms) {
  last_flush_ms_ = now_ms;
  try {
    // Small prune steps, in proportion to the ticks flushed: a backlog drains, no flush is long.
    const bool prune = now_ms - last_prune_ms_ >= kPruneEveryMs;
    store_.flush(now_ms - settings_.retention.count(),
                 prune ? kPruneRowsPerTick * std::max(1, ticks_since_prune_) : 0);
    if (prune) {
      last_prune_ms_ = now_ms;
      ticks_since_prune_ = 0;
    }
    if (stats_.store_failing_writes.exchange(0) != 0) log_.info("history store: writing again");
  } catch (const std::exception& e) {
    ++stats_.store_failing_writes;
    {
      std::lock_guard lock(error_mutex_);
      store_last_error_ = e.what();
    }
    // Logged when it starts failing and once in a while after, not at every attempt.
    if (stats_.store_errors++ % 12 == 0)
      log_.error(std::string("history store: ") + e.what() + " (" +
                 std::to_string(stats_.store_errors.load()) + " failed writes so far; " +
                 std::to_string(store_.pending_rows()) + " samples kept in memory)");
  }
  // Once per commit, hand freed heap back to the kernel: connection buffers of a burst of clients,
  // query results, SQLite pages. glibc returns only the top of each heap by itself, so without
  // this RSS keeps the high-water mark of the busiest minute.
  ::malloc_trim(0);
}

void Collector::tick(std::int64_t tick_index) {
  const std::int64_t iv = settings_.interval.count();
  // Every sample sits on the interval grid, strictly later than the one before (docs/api.md): a
  // tick number already taken (the wall clock went back) takes the next one.
  if (last_index_ != INT64_MIN && tick_index <= last_index_) tick_index = last_index_ + 1;
  last_index_ = tick_index;
  const std::int64_t ts_ms = tick_index * iv;

  std::vector<const MetricValue*> fresh;
  for (auto& slot : sensors_) {
    slot.read_this_tick = tick_index % slot.every_ticks == 0 || !slot.read_before;
    if (!slot.read_this_tick) continue;
    SensorReport& r = slot.report;
    r = SensorReport{};
    r.name = slot.name;
    r.plugin = slot.plugin;
    r.timestamp = static_cast<double>(ts_ms) / 1000.0;
    CheckedSink sink(r.metrics);
    auto start = steady_clock::now();
    try {
      SampleResult result = slot.instance.object->sample(sink);
      r.state = result.status == SampleStatus::ok ? SensorState::ok : SensorState::no_data;
      r.message = std::move(result.message);
    } catch (const std::exception& e) {
      r.state = SensorState::error;
      r.message = e.what();
    } catch (...) {
      r.state = SensorState::error;
      r.message = "unknown exception";
    }
    r.duration_seconds = std::chrono::duration<double>(steady_clock::now() - start).count();
    if (r.state == SensorState::error) {
      r.metrics.clear();  // a half-finished reading is not a reading
    } else if (std::string dropped = sink.finish(); !dropped.empty()) {
      // Logged when it starts and whenever what is dropped changes, not every sample.
      if (dropped != slot.last_invalid_note) log_.warn("sensor " + slot.name + ": " + dropped);
      r.message = r.message.empty() ? dropped : r.message + "; " + dropped;
      slot.last_invalid_note = std::move(dropped);
    } else {
      slot.last_invalid_note.clear();
    }
    r.errors_total = slot.errors_total += (r.state == SensorState::error);
    r.invalid_metrics_total = slot.invalid_metrics_total += sink.dropped();
    if (r.state == SensorState::error && slot.last_state != SensorState::error)
      log_.warn("sensor " + slot.name + " failed: " + r.message);
    slot.last_state = r.state;
    slot.read_before = true;
    for (auto& m : r.metrics) fresh.push_back(&m);
  }

  store_.append(ts_ms, fresh);
  ++ticks_since_prune_;
  if (last_flush_ms_ == 0) last_flush_ms_ = ts_ms;
  if (ts_ms - last_flush_ms_ >= settings_.commit_interval.count()) flush_store(ts_ms);

  auto snap = std::make_shared<Snapshot>();
  snap->sequence = ++sequence_;
  snap->timestamp = static_cast<double>(ts_ms) / 1000.0;
  snap->interval_seconds = static_cast<double>(iv) / 1000.0;
  snap->stale_after_seconds = static_cast<double>(settings_.stale_after.count()) / 1000.0;
  snap->host = settings_.host;
  snap->agent_version = settings_.agent_version;
  snap->started_at = settings_.started_at;
  // Moved, not copied (a copy cost some 200 allocations a tick): a report read now moves in, one
  // not due this tick is copied from the previous snapshot, which every sensor is in from the
  // first tick on (each is read then).
  const auto previous = snapshot_.current();
  snap->sensors.reserve(sensors_.size());
  for (std::size_t i = 0; i < sensors_.size(); ++i) {
    if (sensors_[i].read_this_tick || i >= previous->sensors.size())
      snap->sensors.push_back(std::move(sensors_[i].report));
    else
      snap->sensors.push_back(previous->sensors[i]);
  }
  render_body(*snap);
  if (settings_.snapshot_file) {
    try {
      settings_.snapshot_file->write(*snap->json->body());
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
  snapshot_.publish(std::move(snap));
  ++stats_.ticks;
}

}  // namespace kiwi::agent
