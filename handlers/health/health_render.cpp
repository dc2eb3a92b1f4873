#include "health_render.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <kiwi/json.hpp>
#include <string>
#include <vector>

namespace kiwi_health {

namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  std::string s = buf;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

// How far an output may lag before /api/health says "degraded": three of its intervals, and at
// least a minute (one failed request or a slow receiver is not worth a warning).
double behind_limit(const kiwi::OutputStatus& o) {
  return std::max(60.0, 3 * o.interval_seconds);
}

}  // namespace

Health check(const kiwi::Snapshot& snap, const kiwi::AgentStats& stats, double now) {
  const double age = snap.sequence ? now - snap.timestamp : now - stats.started_at;

  std::vector<std::string> reasons;
  // The port opens before the first sample is taken (it may wait for a slow sensor).
  if (snap.sequence == 0)
    reasons.push_back("starting: the first sample is being taken (" +
                      number(std::max(0.0, now - stats.started_at)) + " s since start)");
  else if (age > snap.stale_after_seconds)
    reasons.push_back("stale: last sample " + number(age) + " s ago (stale after " +
                      number(snap.stale_after_seconds) + " s)");
  if (stats.store_failing_writes)
    reasons.push_back(
        "store: the last " + std::to_string(stats.store_failing_writes) +
        " history writes failed (samples are kept in memory meanwhile): " + stats.store_last_error);
  if (stats.snapshot_file_failing)
    reasons.push_back("snapshot file: the last " + std::to_string(stats.snapshot_file_failing) +
                      " writes of " + stats.snapshot_file +
                      " failed: " + stats.snapshot_file_last_error);
  for (auto& s : snap.sensors)
    if (s.state == kiwi::SensorState::error)
      reasons.push_back("sensor " + s.name + ": " + s.message);

  // An output behind is not a failure of the agent (it samples and serves; the backlog is kept
  // and sent later): "degraded", still 200, with the reason.
  std::vector<std::string> degraded;
  // History goes on in a new file; what was lost is said until a restart acknowledges it.
  if (!stats.store_recovered.empty())
    degraded.push_back("store: the history file was damaged: " + stats.store_recovered);
  for (auto& s : snap.sensors)
    if (s.series_refused_total)
      degraded.push_back("sensor " + s.name + ": " + std::to_string(s.series_refused_total) +
                         " values refused" + (s.message.empty() ? "" : ": " + s.message));
  for (auto& o : stats.outputs)
    if (o.seconds_behind > behind_limit(o))
      degraded.push_back("remote_write " + o.name + ": " + number(o.seconds_behind) +
                         " s behind (more than " + number(behind_limit(o)) + " s)" +
                         (o.last_error.empty() ? "" : ": " + o.last_error));
  // A notifier that cannot deliver keeps its queue in the database and retries with backoff, as
  // an output keeps its backlog: the agent works, the owner may not hear of an alert yet.
  for (auto& n : stats.notifiers)
    if (n.state == "retrying")
      degraded.push_back("notifier " + n.name + ": retrying, " + std::to_string(n.queued) +
                         " queued" + (n.last_error.empty() ? "" : ": " + n.last_error));

  std::string body = !reasons.empty()   ? "{\"status\":\"failing\""
                     : degraded.empty() ? "{\"status\":\"ok\""
                                        : "{\"status\":\"degraded\"";
  body += ",\"uptime_seconds\":" + number(std::floor(std::max(0.0, now - stats.started_at)));
  body += ",\"last_sample_age_seconds\":" + number(std::max(0.0, age));
  body += ",\"sequence\":" + std::to_string(snap.sequence);
  body += ",\"store_write_errors\":" + std::to_string(stats.store_write_errors);
  body += ",\"store_samples_pending\":" + std::to_string(stats.store_samples_pending);
  body += ",\"store_recovered\":";
  if (stats.store_recovered.empty())
    body += "null";
  else
    kiwi::append_json_string(body, stats.store_recovered);
  body += ",\"snapshot_file_write_errors\":" + std::to_string(stats.snapshot_file_errors);
  // A failed reload is not a failure of the agent (the previous configuration serves on): it
  // shows here, and in /api/plugins and /metrics, until a reload succeeds.
  kiwi::append_config_status_json(body, stats.config);
  body += ",\"remote_write\":[";
  for (std::size_t i = 0; i < stats.outputs.size(); ++i) {
    const auto& o = stats.outputs[i];
    if (i) body += ',';
    body += "{\"name\":";
    kiwi::append_json_string(body, o.name);
    body += ",\"state\":";
    kiwi::append_json_string(body, o.state);
    body += ",\"seconds_behind\":" + number(o.seconds_behind);
    body += ",\"samples_pending\":" + std::to_string(o.samples_pending);
    body += ",\"samples_sent_total\":" + std::to_string(o.samples_sent_total);
    body += ",\"batches_dropped_total\":" + std::to_string(o.batches_dropped_total);
    body += ",\"failures_total\":" + std::to_string(o.failures_total);
    body += ",\"last_error\":";
    kiwi::append_json_string(body, o.last_error);
    body += ",\"last_error_at\":" + number(o.last_error_at) + "}";
  }
  body += "],\"alerts\":{\"firing\":" + std::to_string(stats.alerts_firing) +
          ",\"pending\":" + std::to_string(stats.alerts_pending) + "},\"notifiers\":[";
  for (std::size_t i = 0; i < stats.notifiers.size(); ++i) {
    const auto& n = stats.notifiers[i];
    if (i) body += ',';
    body += "{\"name\":";
    kiwi::append_json_string(body, n.name);
    body += ",\"kind\":";
    kiwi::append_json_string(body, n.kind);
    body += ",\"state\":";
    kiwi::append_json_string(body, n.state);
    body += ",\"queued\":" + std::to_string(n.queued);
    body += ",\"sent_total\":" + std::to_string(n.sent_total);
    body += ",\"failures_total\":" + std::to_string(n.failures_total);
    body += ",\"dropped_total\":" + std::to_string(n.dropped_total);
    body += ",\"last_sent_at\":" + number(n.last_sent_at);
    body += ",\"last_error\":";
    kiwi::append_json_string(body, n.last_error);
    body += ",\"last_error_at\":" + number(n.last_error_at) + "}";
  }
  body += "],\"reasons\":[";
  reasons.insert(reasons.end(), degraded.begin(), degraded.end());
  for (std::size_t i = 0; i < reasons.size(); ++i) {
    if (i) body += ',';
    kiwi::append_json_string(body, reasons[i]);
  }
  body += "]}";
  return {reasons.size() == degraded.size() ? 200 : 503, std::move(body)};
}

}  // namespace kiwi_health
