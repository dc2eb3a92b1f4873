#include "app/agent_data.hpp"

#include <chrono>

namespace kiwi::agent {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

AgentStats AgentData::counters() const {
  AgentStats s;
  s.version = KIWI_VERSION;
  s.started_at = started_at;
  {
    std::lock_guard lock(mutex_);
    s.config = config_;
  }
  if (collector) {
    auto& c = collector->stats();
    s.ticks = c.ticks;
    s.missed_ticks = c.missed_ticks;
    s.store_write_errors = c.store_errors;
    s.store_failing_writes = c.store_failing_writes;
    if (s.store_failing_writes) s.store_last_error = collector->store_last_error();
    s.snapshot_file = snapshot_file;
    s.snapshot_file_errors = c.snapshot_file_errors;
    s.snapshot_file_failing = c.snapshot_file_failing;
    if (s.snapshot_file_failing) s.snapshot_file_last_error = collector->snapshot_file_last_error();
  }
  if (store_) {
    s.store_recovered = store_->recovery_note();
    s.store_samples_pending = store_->pending_rows();
  }
  if (server) {
    s.http_requests = server->request_counts();
    s.http_auth_failures = server->auth_failures();
    s.http_auth_rate_limited = server->auth_rate_limited();
  }
  {
    std::lock_guard lock(outputs_mutex_);
    for (auto& o : outputs_) s.outputs.push_back(o->status());
  }
  if (notifier_status) s.notifiers = notifier_status();
  return s;
}

AgentStats AgentData::stats() const {
  AgentStats s = counters();
  for (const Alert& a : alerts()) {
    s.alerts_firing += a.state == AlertState::firing;
    s.alerts_pending += a.state == AlertState::pending;
  }
  std::lock_guard lock(mutex_);
  s.plugins = plugins_;
  return s;
}

}  // namespace kiwi::agent
