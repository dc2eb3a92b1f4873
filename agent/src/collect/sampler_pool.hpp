// The sampler pool: the threads ("kiwi-sampler") that call the sensors' sample() for the
// collector, the queue of jobs they take, and the rules of hand-off, deadlines and stop.
//
// The samplers take the sensors a tick posts, in order, and call their sample(), and destroy
// retired instances; nothing else. One sampler does a whole tick: each thread woken costs more
// than most sensors' reading (tens of µs on a VM). A sensor still in its call kHandOffAfter after
// it began hands the rest of the queue to another sampler (an idle one, or a new one), and its
// thread is renamed "kiwi-s:<sensor>" until the call returns; so a slow or stuck sensor delays the
// others by that much at most, and the pool only grows to as many threads as there are sensors in
// a call at once. At most one call at a time per sensor object.
//
// The collector (one thread) drives it: a round per tick (post, await, wait_for_round,
// end_round), and retire() and shut_down() between ticks.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.hpp"
#include "base/duration.hpp"
#include "plugin/metric_check.hpp"
#include "plugin/plugin_loader.hpp"
#include "plugin/rates.hpp"

namespace kiwi::agent {

// What one sample() call gave: made on a sampler, read by the collector.
struct CallOutcome : SampleCall {
  Clock::SteadyTime posted, started, finished;  // posted: when the collector asked
};

// Where a sensor job is in its life. Every transition is one of SensorJob's functions below,
// each allowed from the states SensorJob::move_to() lists, all under the pool's lock:
//
//   idle --queue()--> queued --begin_call()--> in_call --end_call()--> done --take_outcome()-->
//   idle idle, done --retire()--> doomed (queued again, to be destroyed) queued --retire()-->
//   doomed (already in the queue: destroyed instead of sampled) in_call --retire()--> retiring
//   (destroyed by its sampler when its call returns) doomed --begin_destroy()--> destroying;
//   retiring --end_call()--> destroying destroying --end_destroy()--> destroyed retiring, doomed,
//   destroying --abandon()--> abandoned (stop() gave up on it)
enum class JobState {
  idle,        // nothing asked of it: between calls, or never called
  queued,      // in the job queue, to be sampled
  in_call,     // a sampler is in its sample()
  done,        // its call returned: the outcome waits for the collector
  doomed,      // retired: in the job queue, to be destroyed instead of sampled
  retiring,    // retired during its call: destroyed by its sampler when the call returns
  destroying,  // a sampler is destroying its instance (the plugin's destructor runs)
  destroyed,   // its instance is gone
  abandoned,   // stop() gave up on it (in a call or a destructor); it has its instance no more
};
const char* to_string(JobState state);

// One sensor's side of the hand-off to the samplers. Its state and the times are guarded by the
// pool's lock; `instance`, `uptime` and `rates` are used by the sampler in its call alone, except
// that stop() takes the instance of an abandoned one.
class SensorJob {
 public:
  // `activity`: "sensor <name> (<plugin file>)", named by a crash in sample().
  SensorJob(std::string name, std::string activity, PluginInstance<Sensor> instance,
            const std::string& procfs);

  const std::string name;
  const std::string activity;
  PluginInstance<Sensor> instance;
  KeptFile uptime;    // <procfs>/uptime, the clock of the sensor's rates; the sampler's, in a call
  RateDeriver rates;  // the sampler's, in a call

  JobState state() const { return state_; }
  // Queued or in a call: a reading is coming (or a time-out).
  bool busy() const { return state_ == JobState::queued || state_ == JobState::in_call; }
  // When its call times out: the call's start plus its timeout (posted plus the timeout until it
  // starts), so a sensor queued behind others has its whole timeout. The sink hands it on.
  Clock::SteadyTime deadline() const { return deadline_; }

  // The collector queues it, at `posted`, its call due within `timeout` of its start.
  void queue(Clock::SteadyTime posted, Millis timeout);
  // A sampler took it from the queue at `now` to call it.
  void begin_call(Clock::SteadyTime now);
  // Its call returned with `out`: kept for the collector (true), or, retired meanwhile, to be
  // destroyed now (false; abandoned: nothing more to do, false).
  bool end_call(CallOutcome out);
  // The collector takes what its call gave; it is idle again.
  CallOutcome take_outcome();
  // Retired (or stopping): true when it must be queued to be destroyed (it was idle or done);
  // false when its sampler will get to it (queued, or in a call).
  bool retire();
  // A sampler took it from the queue to destroy its instance.
  void begin_destroy();
  // Its instance is destroyed (nothing if stop() abandoned it meanwhile).
  void end_destroy();
  // stop() gives up on it; true when it is still in its call (its instance is stop()'s to keep).
  bool abandon();

  // The metric check and the rates (call_sensor) only touch `out` and the sensor's own
  // RateDeriver, so they run here, on the sampler. `until` is the instant the collector times
  // this call out at (MetricSink::deadline()). `sensor` is the instance's object, taken under the
  // pool's lock (stop() may take the instance of an abandoned call meanwhile).
  void call(Sensor& sensor, CallOutcome& out, Clock::SteadyTime started, Clock::SteadyTime until,
            const Clock& clock);
  Clock::SteadyTime posted() const { return posted_; }

 private:
  // The one place that says which transitions there are; any other is a bug (std::logic_error).
  void move_to(JobState next);

  JobState state_ = JobState::idle;
  Clock::SteadyTime posted_;    // when the collector queued it
  Millis timeout_{0};           // its call's, as of then
  Clock::SteadyTime deadline_;  // see deadline()
  CallOutcome outcome_;         // done: what its call gave
};

class SamplerPool {
 public:
  using Lock = std::unique_lock<std::mutex>;

  // How long a sensor's call may hold up the sensors queued after it before another sampler takes
  // them: far beyond a procfs read (about 0.1 ms), short against the publish budget (half an
  // interval, 50 ms at the shortest).
  static constexpr Millis kHandOffAfter{20};
  // shut_down(): how long sensors get to return, in all.
  static constexpr Millis kStopGrace{2000};

  // `clock` and `log` outlive the pool; start() makes its first thread.
  SamplerPool(Clock& clock, Logger& log);
  // shut_down() with no more jobs, if not done yet.
  ~SamplerPool();
  SamplerPool(const SamplerPool&) = delete;
  SamplerPool& operator=(const SamplerPool&) = delete;

  // The first sampler, idle until a job comes (the first tick then needs only to wake it).
  void start();

  // The lock of the jobs' state, the queue and the pool.
  Lock lock();

  // One round (a tick), the lock held. post(): `job`, idle, is queued to be sampled, its call due
  // within `timeout` of its start, and the round waits for it.
  void post(const Lock&, const std::shared_ptr<SensorJob>& job, Clock::SteadyTime posted,
            Millis timeout);
  // The round waits for `job`, in a call since an earlier tick, too (until its deadline).
  void await(const Lock&, SensorJob& job);
  // Waits until every job the round waits for is done or past its deadline, or `publish_by`,
  // handing the queue on as calls run long.
  void wait_for_round(Lock& lock, Clock::SteadyTime publish_by);
  // Nothing is waited for any more.
  void end_round(const Lock&);
  // The outcome of `job` if its call is done (it is idle again).
  std::optional<CallOutcome> take_outcome(const Lock&, SensorJob& job);

  // Retires `jobs`: idle ones are destroyed on a sampler now, and waited for (as long as their
  // destructors take); those in a call (or queued behind one) are destroyed by their sampler
  // when it gets to them, and kept meanwhile.
  void retire(std::vector<std::shared_ptr<SensorJob>> jobs);
  // Lets go of the retired jobs that are gone.
  void reap_retired();
  // Gives every job of `jobs` and every retired one kStopGrace in all to return from its call and
  // be destroyed on a sampler; the samplers are joined, except those still in a call, which are
  // abandoned (thread detached, instance deliberately leaked so that its library stays loaded;
  // logged). Returns how many jobs were abandoned. Once.
  std::size_t shut_down(std::vector<std::shared_ptr<SensorJob>> jobs);

 private:
  struct Hub;
  struct Sampler;
  Clock::SteadyTime hand_off(Lock& lock);
  void start_sampler();
  template <class Done>
  bool wait_for_samplers(Lock& lock, Clock::SteadyTime until, Done done);

  Clock& clock_;
  Logger& log_;
  std::shared_ptr<Hub> hub_;  // shared with the samplers: one abandoned at stop keeps it
  std::vector<std::shared_ptr<SensorJob>> retiring_;  // retired while busy; dropped once gone
  bool shut_down_ = false;
};

}  // namespace kiwi::agent
