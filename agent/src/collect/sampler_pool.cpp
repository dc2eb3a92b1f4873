#include "collect/sampler_pool.hpp"

#include <algorithm>
#include <stdexcept>

#include "base/fatal_signal.hpp"
#include "base/thread_name.hpp"

namespace kiwi::agent {

namespace {

using SteadyTime = Clock::SteadyTime;

// An abandoned sensor's instance: kept, never destroyed, so the code of a library whose sample()
// may still run is never unloaded (c_abi.hpp, keep_forever).
void keep_instance_forever(PluginInstance<Sensor> instance) {
  keep_forever(std::make_shared<PluginInstance<Sensor>>(std::move(instance)));
}

}  // namespace

const char* to_string(JobState state) {
  switch (state) {
    case JobState::idle:
      return "idle";
    case JobState::queued:
      return "queued";
    case JobState::in_call:
      return "in_call";
    case JobState::done:
      return "done";
    case JobState::doomed:
      return "doomed";
    case JobState::retiring:
      return "retiring";
    case JobState::destroying:
      return "destroying";
    case JobState::destroyed:
      return "destroyed";
    case JobState::abandoned:
      return "abandoned";
  }
  return "?";
}

SensorJob::SensorJob(std::string name_, std::string activity_, PluginInstance<Sensor> instance_,
                     const std::string& procfs)
    : name(std::move(name_)),
      activity(std::move(activity_)),
      instance(std::move(instance_)),
      uptime(join_path(procfs, "uptime")) {}

void SensorJob::move_to(JobState next) {
  using S = JobState;
  const S from = state_;
  bool allowed = false;
  switch (next) {
    case S::idle:
      allowed = from == S::done;
      break;
    case S::queued:
      allowed = from == S::idle;
      break;
    case S::in_call:
      allowed = from == S::queued;
      break;
    case S::done:
      allowed = from == S::in_call;
      break;
    case S::doomed:
      allowed = from == S::idle || from == S::done || from == S::queued;
      break;
    case S::retiring:
      allowed = from == S::in_call;
      break;
    case S::destroying:
      allowed = from == S::doomed || from == S::retiring;
      break;
    case S::destroyed:
      allowed = from == S::destroying;
      break;
    case S::abandoned:
      allowed = from == S::doomed || from == S::retiring || from == S::destroying;
      break;
  }
  if (!allowed)
    throw std::logic_error("sensor " + name + ": no transition from " + to_string(from) + " to " +
                           to_string(next));
  state_ = next;
}

void SensorJob::queue(SteadyTime posted, Millis timeout) {
  move_to(JobState::queued);
  posted_ = posted;
  timeout_ = timeout;
  deadline_ = posted + timeout;
}

void SensorJob::begin_call(SteadyTime now) {
  move_to(JobState::in_call);
  deadline_ = now + timeout_;
}

bool SensorJob::end_call(CallOutcome out) {
  switch (state_) {
    case JobState::in_call:
      outcome_ = std::move(out);
      move_to(JobState::done);
      return true;
    case JobState::retiring:
      move_to(JobState::destroying);
      return false;
    default:  // abandoned: its instance is stop()'s
      return false;
  }
}

CallOutcome SensorJob::take_outcome() {
  move_to(JobState::idle);
  CallOutcome out = std::move(outcome_);
  outcome_ = {};
  return out;
}

bool SensorJob::retire() {
  switch (state_) {
    case JobState::idle:
    case JobState::done:
      move_to(JobState::doomed);
      return true;
    case JobState::queued:
      move_to(JobState::doomed);
      return false;
    case JobState::in_call:
      move_to(JobState::retiring);
      return false;
    default:  // retired already
      return false;
  }
}

void SensorJob::begin_destroy() {
  move_to(JobState::destroying);
}

void SensorJob::end_destroy() {
  if (state_ == JobState::destroying) move_to(JobState::destroyed);
}

bool SensorJob::abandon() {
  const bool in_call = state_ == JobState::retiring;
  move_to(JobState::abandoned);
  return in_call;
}

void SensorJob::call(Sensor& sensor, CallOutcome& out, SteadyTime started, SteadyTime until,
                     const Clock& clock) {
  CurrentActivity running(activity.c_str());
  out.started = started;
  static_cast<SampleCall&>(out) = call_sensor(sensor, rates, uptime, until);
  out.finished = clock.steady_now();
}

// A thread of the pool. Guarded by hub->mutex, but `thread`, which the collector alone touches.
struct SamplerPool::Sampler {
  enum class State {
    waiting,     // starting, idle, or between two jobs: it takes the next one
    working,     // calling or destroying `current`
    handed_off,  // working, and the collector gave the queue to another sampler meanwhile
    exited,
  };
  std::thread thread;
  State state = State::waiting;
  SensorJob* current = nullptr;  // the sensor it calls or destroys now
  SteadyTime since;              // when it took `current`
};

// The lock every sensor and sampler shares with the collector, the job queue and the pool.
struct SamplerPool::Hub {
  explicit Hub(Clock& c) : clock(c) {}
  Clock& clock;
  std::mutex mutex;
  std::condition_variable cv;    // to the collector: the last awaited reading, or a sensor gone
  std::condition_variable work;  // to the samplers: a job, or closing
  std::deque<std::shared_ptr<SensorJob>> jobs;  // sensors to sample (queued) or destroy (doomed)
  std::vector<std::shared_ptr<Sampler>> samplers;
  std::vector<SensorJob*> awaited;  // sensors the tick in progress still waits for
  int idle = 0;                     // samplers waiting for a job
  bool closing = false;             // stop(): samplers exit once the queue is empty

  // A sampler's life: the next job, in order, until closing and none is left.
  static void run(std::shared_ptr<Hub> hub, std::shared_ptr<Sampler> self) {
    name_this_thread("kiwi-sampler");
    std::unique_lock lock(hub->mutex);
    for (;;) {
      if (hub->jobs.empty()) {
        if (hub->closing) break;
        ++hub->idle;
        // On the clock, with no time limit: a test's fake clock then sees that this thread has
        // nothing to do (FakeClock::await_waiters) before it moves the time on.
        hub->clock.wait_until(hub->work, lock, SteadyTime::max(),
                              [&] { return !hub->jobs.empty() || hub->closing; });
        --hub->idle;
        continue;
      }
      std::shared_ptr<SensorJob> job = std::move(hub->jobs.front());
      hub->jobs.pop_front();
      self->state = Sampler::State::working;
      self->current = job.get();
      self->since = hub->clock.steady_now();
      if (job->state() == JobState::queued)
        hub->call(lock, *job, self->since);
      else if (job->state() == JobState::doomed)
        job->begin_destroy();
      // Retired (before or during its call) or stopping: the instance goes here, object first,
      // then its library. An abandoned one's instance is stop()'s: not touched.
      if (job->state() == JobState::destroying) {
        {
          CurrentActivity destroying(job->activity.c_str());  // the plugin's destructor runs here
          PluginInstance<Sensor> dying = std::move(job->instance);
          lock.unlock();
        }
        lock.lock();
        job->end_destroy();
        hub->cv.notify_all();
      }
      const bool was_handed_off = self->state == Sampler::State::handed_off;
      self->state = Sampler::State::waiting;
      self->current = nullptr;
      if (was_handed_off) name_this_thread("kiwi-sampler");
    }
    self->state = Sampler::State::exited;
    lock.unlock();
    hub->cv.notify_all();
  }

  // Calls the sensor of `job` (lock held on entry and on return, not during the call).
  void call(std::unique_lock<std::mutex>& lock, SensorJob& job, SteadyTime started) {
    job.begin_call(started);
    Sensor& sensor = *job.instance.object;
    CallOutcome out;
    out.posted = job.posted();
    const SteadyTime until = job.deadline();
    lock.unlock();
    job.call(sensor, out, started, until, clock);
    lock.lock();
    if (!job.end_call(std::move(out))) return;
    auto it = std::find(awaited.begin(), awaited.end(), &job);
    if (it == awaited.end()) return;
    awaited.erase(it);
    if (awaited.empty()) cv.notify_all();  // one wakeup per tick
  }
};

SamplerPool::SamplerPool(Clock& clock, Logger& log)
    : clock_(clock), log_(log), hub_(std::make_shared<Hub>(clock)) {}

SamplerPool::~SamplerPool() {
  if (!shut_down_) shut_down({});
}

void SamplerPool::start() {
  Lock lock(hub_->mutex);
  start_sampler();
}

SamplerPool::Lock SamplerPool::lock() {
  return Lock(hub_->mutex);
}

void SamplerPool::post(const Lock&, const std::shared_ptr<SensorJob>& job, SteadyTime posted,
                       Millis timeout) {
  job->queue(posted, timeout);
  hub_->jobs.push_back(job);
  hub_->awaited.push_back(job.get());
}

void SamplerPool::await(const Lock&, SensorJob& job) {
  hub_->awaited.push_back(&job);
}

// Until the last one is done, or each one's deadline, or the publish budget.
void SamplerPool::wait_for_round(Lock& lock, SteadyTime publish_by) {
  auto& awaited = hub_->awaited;
  while (!awaited.empty()) {
    auto until = publish_by;
    for (SensorJob* job : awaited) until = std::min(until, job->deadline());
    if (wait_for_samplers(lock, until, [&] { return awaited.empty(); })) break;
    const auto now = clock_.steady_now();
    if (now >= publish_by) break;
    std::erase_if(awaited, [&](SensorJob* job) { return now >= job->deadline(); });
  }
}

void SamplerPool::end_round(const Lock&) {
  hub_->awaited.clear();
}

std::optional<CallOutcome> SamplerPool::take_outcome(const Lock&, SensorJob& job) {
  if (job.state() != JobState::done) return std::nullopt;
  return job.take_outcome();
}

// Sees that the job queue is served (hub lock held): by an idle sampler (woken), or by one in a
// call that began less than kHandOffAfter ago, or else by a new one. A sampler past that is
// handed off: renamed after its sensor until the call returns, no longer counted on. Returns
// when to look again: while jobs wait, within kHandOffAfter; else time_point::max().
SteadyTime SamplerPool::hand_off(Lock&) {
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
    switch (s->state) {
      case Sampler::State::exited:
      case Sampler::State::handed_off:
        break;
      case Sampler::State::waiting:  // it takes the next one
        served = true;
        break;
      case Sampler::State::working:
        if (now < s->since + kHandOffAfter) {
          served = true;
          next = std::min(next, s->since + kHandOffAfter);
        } else {
          s->state = Sampler::State::handed_off;
          name_thread(s->thread.native_handle(), "kiwi-s:" + s->current->name);  // `top -H`
        }
        break;
    }
  }
  if (!served) start_sampler();
  return next;
}

// Adds a sampler to the pool (hub lock held).
void SamplerPool::start_sampler() {
  auto sampler = std::make_shared<Sampler>();
  sampler->thread = std::thread(&Hub::run, hub_, sampler);
  hub_->samplers.push_back(std::move(sampler));
}

// Waits on hub->cv until `done()` or `until`, handing the queue off as calls run long. The hub
// lock is held on entry and on return; returns done().
template <class Done>
bool SamplerPool::wait_for_samplers(Lock& lock, SteadyTime until, Done done) {
  while (!done()) {
    const auto look_again = hand_off(lock);
    if (clock_.steady_now() >= until) return false;
    clock_.wait_until(hub_->cv, lock, std::min(until, look_again));
  }
  return true;
}

namespace {
bool all_destroyed(const std::vector<std::shared_ptr<SensorJob>>& jobs) {
  return std::all_of(jobs.begin(), jobs.end(),
                     [](auto& job) { return job->state() == JobState::destroyed; });
}
}  // namespace

void SamplerPool::retire(std::vector<std::shared_ptr<SensorJob>> jobs) {
  if (jobs.empty()) return;
  std::vector<std::shared_ptr<SensorJob>> now;
  Lock lock(hub_->mutex);
  for (auto& job : jobs) {
    if (job->retire()) {
      hub_->jobs.push_back(job);
      now.push_back(std::move(job));
    } else {
      retiring_.push_back(std::move(job));
    }
  }
  wait_for_samplers(lock, SteadyTime::max(), [&] { return all_destroyed(now); });
}

void SamplerPool::reap_retired() {
  if (retiring_.empty()) return;
  std::lock_guard lock(hub_->mutex);
  std::erase_if(retiring_, [](const std::shared_ptr<SensorJob>& job) {
    return job->state() == JobState::destroyed;
  });
}

std::size_t SamplerPool::shut_down(std::vector<std::shared_ptr<SensorJob>> all) {
  shut_down_ = true;
  for (auto& job : retiring_) all.push_back(std::move(job));
  retiring_.clear();
  std::vector<std::shared_ptr<Sampler>> samplers;
  std::vector<std::string> abandoned;
  {
    Lock lock(hub_->mutex);
    hub_->closing = true;
    for (auto& job : all)
      if (job->retire()) hub_->jobs.push_back(job);
    hub_->work.notify_all();
    // One bound for all of them: SIGTERM never waits longer for a sensor.
    wait_for_samplers(lock, clock_.steady_now() + kStopGrace, [&] {
      return all_destroyed(all) &&
             std::all_of(hub_->samplers.begin(), hub_->samplers.end(),
                         [](auto& s) { return s->state == Sampler::State::exited; });
    });
    for (auto& job : all) {
      if (job->state() == JobState::destroyed) continue;
      if (job->abandon()) {
        keep_instance_forever(std::move(job->instance));
        abandoned.push_back("sensor " + job->name +
                            " abandoned: its sample() has not returned after " +
                            format_duration(kStopGrace) + "; its library stays loaded");
      } else {
        abandoned.push_back("sensor " + job->name +
                            " abandoned: its thread has not finished after " +
                            format_duration(kStopGrace) + " (in the sensor's destructor)");
      }
    }
    hub_->jobs.clear();
    samplers = hub_->samplers;
  }
  // A sampler still in a call (or a destructor) goes on alone, holding what it uses.
  for (auto& s : samplers) {
    bool exited;
    {
      std::lock_guard lock(hub_->mutex);
      exited = s->state == Sampler::State::exited;
    }
    if (exited)
      s->thread.join();
    else
      s->thread.detach();
  }
  for (auto& line : abandoned) log_.warn(line);
  return abandoned.size();
}

}  // namespace kiwi::agent
