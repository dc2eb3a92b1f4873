// The alert rules ([[alert]], docs/alerts.md) evaluated at every tick against the snapshot being
// assembled, as one of the agent's own reports (kAlertsReport, "alerts", read after the agent's
// telemetry, so rules see it too). Each rule matches series (or, a status rule, sensors); each
// match is an instance with a state of its own:
//
//   inactive --holds--> pending --held for `for`--> firing --cleared--> resolved
//       ^                  |                                              |
//       '---- not held ----'                 resolved --holds--> pending -'
//
// "Holds": the value is past the threshold (above: >, below: <). "Cleared" (hysteresis): the value
// is back past the threshold by `hysteresis` (above: <= threshold - h), continuously for
// `keep_firing_for`; so a value hovering at the threshold fires once and stays firing. A firing
// instance whose series is gone resolves. A value it cannot tell (a rate's first sample, NaN)
// changes nothing. Resolved instances are shown for kResolvedShownFor, then forgotten.
//
// The instances not inactive are kept in the store (Store::set_alert_states) whenever one
// changes state, and every firing and resolve is logged there (Store::log_alert_event) for the
// notifiers, both with the next commit: a restart restores them (a firing alert keeps its start
// and is not notified again).
#pragma once

#include <kiwi/model.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "base/log.hpp"
#include "collect/self_report.hpp"
#include "config/alert_rule.hpp"
#include "config/config.hpp"
#include "store/store.hpp"

namespace kiwi::agent {

class AlertEngine final : public SelfReport {
 public:
  static constexpr std::int64_t kResolvedShownForMs = 3'600'000;

  // Restores the instances the store kept.
  AlertEngine(Store& store, Logger& log);
  ~AlertEngine() override;

  // The rules in force (all of them, and the names [alerts] disable), at start and at reload
  // (any thread): instances of a rule that stays (same name) keep their state; those of a rule
  // that is gone or disabled are forgotten (a firing one is logged as resolved).
  void configure(const std::vector<AlertRule>& rules, const std::vector<std::string>& disabled);

  std::span<const MetricSpec> metrics() const override;
  // Collector thread: evaluates every rule against `tick` and emits alert_firing for each firing
  // instance.
  SampleResult sample(const Snapshot& tick, MetricSink& sink) override;

  // Every instance not inactive, firing first, then pending, then resolved; by name and labels
  // within. Any thread.
  std::vector<Alert> alerts() const;

  // Pure pieces, for tests.
  static std::string render(std::string_view summary_template, const Alert& a,
                            std::string_view message);
  static std::string render(std::span<const TemplatePiece> summary, const Alert& a,
                            std::string_view message);
  static std::string format_value(double v);

 private:
  struct Rule;
  struct Instance;
  void find_candidates(Rule& rule, const Snapshot& tick);
  void evaluate(Rule& rule, const Snapshot& tick, std::int64_t now_ms);
  void step(Rule& rule, Instance& in, bool seen, std::int64_t now_ms);
  void transition(Rule& rule, Instance& in, AlertState to, std::int64_t now_ms);
  std::vector<Alert> list() const;

  Store& store_;
  Logger& log_;
  mutable std::mutex mutex_;  // rules_: configure() vs sample() vs alerts()
  std::vector<std::unique_ptr<Rule>> rules_;
  std::map<std::string, std::vector<Alert>> restored_;  // by rule name, until its rule runs
  std::vector<std::uint64_t> layout_;                   // the last tick's (sample())
  bool changed_ = false;  // a transition this tick: the store's copy is rewritten
};

}  // namespace kiwi::agent
