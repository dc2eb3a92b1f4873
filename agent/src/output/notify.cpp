#include "output/notify.hpp"

#include <kiwi/glob.hpp>
#include <kiwi/utf8.hpp>

#include "base/thread_name.hpp"
#include "output/output.hpp"

namespace kiwi::agent {

namespace {
const std::string kCursorPrefix = "notify:";
}

Millis default_repeat_interval(std::string_view kind) {
  return kind == "alertmanager" ? Millis(60'000) : Millis(4 * 3'600'000);
}

NotifyRunner::NotifyRunner(NotifierSpec spec, Store& store,
                           std::function<std::vector<Alert>()> firing, std::function<void()> acked,
                           Logger& log, Clock& clock)
    : spec_(std::move(spec)),
      store_(store),
      firing_(std::move(firing)),
      on_acked_(std::move(acked)),
      log_(log),
      clock_(clock) {
  if (auto c = store_.cursor(kCursorPrefix + spec_.name)) {
    acked_ = static_cast<std::uint64_t>(*c);
  } else {
    acked_ = store_.newest_alert_event();
    store_.set_cursor(kCursorPrefix + spec_.name, static_cast<std::int64_t>(acked_.load()));
    send_firing_now_ = true;
  }
  next_repeat_ms_ = clock_.wall_ms() + spec_.repeat_interval.count();
  status_.name = spec_.name;
  status_.kind = spec_.kind;
  status_.state = "idle";
}

NotifyRunner::~NotifyRunner() {
  stop();
}

void NotifyRunner::start() {
  thread_ = std::thread([this] {
    name_this_thread("kiwi-n:" + spec_.name);
    run();
  });
}

void NotifyRunner::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::uint64_t NotifyRunner::acked() const {
  return acked_.load();
}

NotifierStatus NotifyRunner::status() const {
  std::lock_guard lock(status_mutex_);
  return status_;
}

bool NotifyRunner::wanted(const std::string& rule, Severity s) const {
  if (s < spec_.min_severity) return false;
  if (spec_.alerts.empty()) return true;
  for (auto& g : spec_.alerts)
    if (glob_match(g, rule)) return true;
  return false;
}

WriteResult NotifyRunner::send(Notification& n) {
  n.host = spec_.host;
  n.agent_url = spec_.agent_url;
  // A firing alert is valid for four repeat intervals: a receiver that stops hearing of it
  // (the agent gone) ends it then, as Alertmanager does with Prometheus's endsAt.
  const double valid_until =
      static_cast<double>(clock_.wall_ms() + 4 * spec_.repeat_interval.count()) / 1000;
  for (auto& a : n.alerts)
    if (a.firing && a.ends_at == 0) a.ends_at = valid_until;
  try {
    return spec_.instance.object->send(n);
  } catch (const std::exception& e) {
    return WriteResult::retry(e.what());
  }
}

NotifyRunner::Step NotifyRunner::step() {
  Notification n;
  std::uint64_t newest = acked_;
  bool more = false;
  auto add_firing = [&] {
    for (const Alert& a : firing_())
      if (a.state == AlertState::firing && wanted(a.name, a.severity))
        n.alerts.push_back({a.name, a.labels, a.sensor, a.severity, true, a.summary, a.value,
                            a.threshold, a.active_at, 0, 0});
  };
  if (send_firing_now_) add_firing();
  if (n.alerts.empty()) {  // the transitions after the cursor
    send_firing_now_ = false;
    const auto events = store_.alert_events_after(acked_, kNotifyBatch);
    more = events.size() == kNotifyBatch;
    for (const AlertNotice& e : events) {
      newest = e.sequence;
      if (wanted(e.name, e.severity)) n.alerts.push_back(e);
    }
    const std::uint64_t last = store_.newest_alert_event();
    std::lock_guard lock(status_mutex_);
    status_.queued = n.alerts.size() + (last > newest ? last - newest : 0);
  }
  const std::int64_t now_ms = clock_.wall_ms();
  if (n.alerts.empty() && newest == acked_) {  // nothing new: a repeat, when one is due
    if (now_ms < next_repeat_ms_) return Step::idle;
    add_firing();
    next_repeat_ms_ = now_ms + spec_.repeat_interval.count();
    if (n.alerts.empty()) return Step::idle;
    n.repeat = true;
  }
  WriteResult r = n.alerts.empty() ? WriteResult::ok() : send(n);
  const double now = static_cast<double>(now_ms) / 1000;
  auto take = [&] {
    send_firing_now_ = false;
    if (newest != acked_) {
      acked_ = newest;
      store_.set_cursor(kCursorPrefix + spec_.name, static_cast<std::int64_t>(newest));
      if (on_acked_) on_acked_();
    }
    failures_in_row_ = 0;
    const std::uint64_t last = store_.newest_alert_event();
    std::lock_guard lock(status_mutex_);
    status_.queued = last > newest ? last - newest : 0;
  };
  switch (r.status) {
    case WriteStatus::ok: {
      if (failures_in_row_ > 0)
        log_.info("notifier " + spec_.name + ": the receiver answers again after " +
                  std::to_string(failures_in_row_) +
                  (failures_in_row_ == 1 ? " failure" : " failures"));
      take();
      std::lock_guard lock(status_mutex_);
      if (!n.alerts.empty()) {
        ++status_.sent_total;
        status_.last_sent_at = now;
      }
      return more ? Step::more : n.alerts.empty() ? Step::idle : Step::sent;
    }
    case WriteStatus::drop: {
      log_.warn("notifier " + spec_.name + ": the receiver refused " +
                std::to_string(n.alerts.size()) + " alerts, dropped: " + r.reason);
      take();
      std::lock_guard lock(status_mutex_);
      ++status_.dropped_total;
      status_.last_error = to_valid_utf8(r.reason);
      status_.last_error_at = now;
      return more ? Step::more : Step::dropped;
    }
    case WriteStatus::retry:
    default: {
      if (failures_in_row_ == 0)
        log_.warn("notifier " + spec_.name + ": cannot send, will retry: " + r.reason);
      ++failures_in_row_;
      if (n.repeat) next_repeat_ms_ = now_ms;  // the repeat is due again
      std::lock_guard lock(status_mutex_);
      ++status_.failures_total;
      status_.last_error = to_valid_utf8(r.reason);
      status_.last_error_at = now;
      return Step::retry;
    }
  }
}

void NotifyRunner::run() {
  // New transitions are committed with the collector's commits; looking once a second finds
  // them within a second of their commit at the cost of a lock and a copy.
  constexpr Millis kPoll{1000};
  for (;;) {
    const Step s = step();
    Millis wait = kPoll;
    const char* state = "idle";
    if (s == Step::more) {
      wait = Millis(0);
      state = "sending";
    } else if (s == Step::retry) {
      wait = backoff_delay(failures_in_row_);
      state = "retrying";
    }
    {
      std::lock_guard lock(status_mutex_);
      status_.state = state;
    }
    std::unique_lock lock(mutex_);
    if (clock_.wait_until(wake_, lock, clock_.steady_now() + wait, [&] { return stopping_; }))
      return;
  }
}

}  // namespace kiwi::agent
