#include "collect/sampler_pool.hpp"

#include <pthread.h>

#include <algorithm>

#include "base/fatal_signal.hpp"

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

SensorJob::SensorJob(std::string name_, std::string activity_, PluginInstance<Sensor> instance_,
                     const std::string& procfs)
    : name(std::move(name_)),
      activity(std::move(activity_)),
      instance(std::move(instance_)),
      uptime(join_path(procfs, "uptime")) {}

void SensorJob::call(Sensor& sensor, CallOutcome& out, SteadyTime started, SteadyTime until,
                     const Clock& clock) {
  CurrentActivity running(activity.c_str());
  out.started = started;
  static_cast<SampleCall&>(out) = call_sensor(sensor, rates, uptime, until);
  out.finished = clock.steady_now();
}

// A thread of the pool. Guarded by hub->mutex, but `thread`, which the collector alone touches.
struct SamplerPool::Sampler {
  std::thread thread;
  SensorJob* current = nullptr;  // the sensor it calls or destroys now
  SteadyTime since;
  bool handed_off = false;  // the collector gave the queue to another sampler meanwhile
  bool exited = false;
};

// The lock every sensor and sampler shares with the collector, the job queue and the pool.
struct SamplerPool::Hub {
  explicit Hub(Clock& c) : clock(c) {}
  Clock& clock;
  std::mutex mutex;
  std::condition_variable cv;    // to the collector: the last awaited reading, or a sensor gone
  std::condition_variable work;  // to the samplers: a job, or closing
  std::deque<std::shared_ptr<SensorJob>> jobs;  // sensors to sample, or to destroy (exit)
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
      std::shared_ptr<SensorJob> w = std::move(hub->jobs.front());
      hub->jobs.pop_front();
      w->requested = false;
      self->current = w.get();
      self->since = hub->clock.steady_now();
      if (!w->exit) {
        w->in_call = true;
        w->deadline = self->since + w->timeout;
        Sensor& sensor = *w->instance.object;
        CallOutcome out;
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
  job->requested = true;
  job->posted = posted;
  job->timeout = timeout;
  job->deadline = posted + timeout;
  hub_->jobs.push_back(job);
  job->awaited = true;
  ++hub_->awaited;
  round_.push_back(job.get());
}

void SamplerPool::await(const Lock&, SensorJob& job) {
  job.awaited = true;
  ++hub_->awaited;
  round_.push_back(&job);
}

// Until the last one is done, or each one's deadline, or the publish budget.
void SamplerPool::wait_for_round(Lock& lock, SteadyTime publish_by) {
  while (hub_->awaited > 0) {
    auto until = publish_by;
    for (SensorJob* w : round_)
      if (w->awaited) until = std::min(until, w->deadline);
    if (wait_for_samplers(lock, until, [&] { return hub_->awaited == 0; })) break;
    const auto now = clock_.steady_now();
    if (now >= publish_by) break;
    for (SensorJob* w : round_) {
      if (w->awaited && now >= w->deadline) {
        w->awaited = false;
        --hub_->awaited;
      }
    }
  }
}

void SamplerPool::end_round(const Lock&) {
  for (SensorJob* w : round_) w->awaited = false;
  round_.clear();
  hub_->awaited = 0;
}

std::optional<CallOutcome> SamplerPool::take_outcome(const Lock&, SensorJob& job) {
  if (!job.done) return std::nullopt;
  std::optional<CallOutcome> out(std::move(job.outcome));
  job.outcome = {};
  job.done = false;
  return out;
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

void SamplerPool::retire(std::vector<std::shared_ptr<SensorJob>> jobs) {
  if (jobs.empty()) return;
  std::vector<std::shared_ptr<SensorJob>> now;
  Lock lock(hub_->mutex);
  for (auto& w : jobs) {
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

void SamplerPool::reap_retired() {
  if (retiring_.empty()) return;
  std::lock_guard lock(hub_->mutex);
  std::erase_if(retiring_, [](const std::shared_ptr<SensorJob>& w) { return w->exited; });
}

std::size_t SamplerPool::shut_down(std::vector<std::shared_ptr<SensorJob>> all) {
  shut_down_ = true;
  for (auto& w : retiring_) all.push_back(std::move(w));
  retiring_.clear();
  std::vector<std::shared_ptr<Sampler>> samplers;
  std::vector<std::string> abandoned;
  {
    Lock lock(hub_->mutex);
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
  return abandoned.size();
}

}  // namespace kiwi::agent
