// The notify runner (output/notify.hpp) with an in-process notifier, a real store (SQLite file)
// and a fake clock, driven by step(): transitions in order, a receiver down keeps them queued
// and gets each one afterwards, a refusal is skipped, a new notifier sends what fires, repeats,
// and a restart on the same file sends nothing twice.
#include <catch2/catch.hpp>
#include <cmath>

#include "fake_clock.hpp"
#include "output/notify.hpp"
#include "test_support.hpp"

using namespace kiwi;
using namespace kiwi::agent;

namespace {

struct Receiver {
  std::vector<Notification> got;
  WriteResult answer = WriteResult::ok();
};

class FakeNotifier final : public Notifier {
 public:
  explicit FakeNotifier(Receiver& r) : r_(r) {}
  WriteResult send(const Notification& n) override {
    if (r_.answer.status == WriteStatus::ok) r_.got.push_back(n);
    return r_.answer;
  }

 private:
  Receiver& r_;
};

AlertNotice notice(std::string name, bool firing, double at) {
  AlertNotice n;
  n.name = std::move(name);
  n.firing = firing;
  n.severity = Severity::warning;
  n.summary = n.name + (firing ? " fires" : " resolved");
  n.starts_at = at;
  n.ends_at = firing ? 0 : at + 5;
  n.threshold = std::nan("");
  return n;
}

struct Bench {
  kiwi_test::TempDb db;
  kiwi_test::LogLines log;
  FakeClock clock;
  Receiver receiver;
  std::vector<Alert> firing;
  std::unique_ptr<Store> store = std::make_unique<Store>(db.path());

  std::unique_ptr<NotifyRunner> runner(std::vector<std::string> alerts = {},
                                       Severity min = Severity::info) {
    NotifierSpec spec;
    spec.name = "phone";
    spec.kind = "ntfy";
    spec.alerts = std::move(alerts);
    spec.min_severity = min;
    spec.repeat_interval = Millis(4 * 3'600'000);
    spec.host = "barn";
    spec.instance.object = std::make_unique<FakeNotifier>(receiver);
    return std::make_unique<NotifyRunner>(
        std::move(spec), *store, [this] { return firing; }, nullptr, log, clock);
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (auto& n : receiver.got)
      for (auto& a : n.alerts) out.push_back(a.name + (a.firing ? "+" : "-"));
    return out;
  }
};

}  // namespace

TEST_CASE("notify: transitions are sent once committed, oldest first, with the host") {
  Bench b;
  auto r = b.runner();
  b.store->log_alert_event(notice("hot", true, 100));
  CHECK(r->step() == NotifyRunner::Step::idle);  // not committed yet
  b.store->flush(0, 0);
  b.store->log_alert_event(notice("full", true, 101));
  b.store->log_alert_event(notice("hot", false, 102));
  b.store->flush(0, 0);
  CHECK(r->step() == NotifyRunner::Step::sent);
  CHECK(b.names() == std::vector<std::string>{"hot+", "full+", "hot-"});
  CHECK(b.receiver.got[0].host == "barn");
  CHECK_FALSE(b.receiver.got[0].repeat);
  // A firing notice is valid for four repeat intervals; a resolved one keeps its end.
  CHECK(b.receiver.got[0].alerts[0].ends_at ==
        static_cast<double>(b.clock.wall_ms()) / 1000 + 4 * 4 * 3600);
  CHECK(b.receiver.got[0].alerts[2].ends_at == 107);
  CHECK(r->step() == NotifyRunner::Step::idle);
  CHECK(b.receiver.got.size() == 1);
  CHECK(r->status().sent_total == 1);
}

TEST_CASE(
    "notify: a receiver down for an hour gets every firing and resolve afterwards, in "
    "order") {
  Bench b;
  auto r = b.runner();
  b.receiver.answer = WriteResult::retry("connection refused");
  for (int i = 0; i < 60; ++i) {
    b.store->log_alert_event(notice("hot", i % 2 == 0, 100 + i));
    b.store->flush(0, 0);
    CHECK(r->step() == NotifyRunner::Step::retry);
    b.clock.advance(std::chrono::minutes(1));
  }
  CHECK(r->status().failures_total == 60);
  CHECK(r->status().queued == 60);
  CHECK(b.log.count("cannot send, will retry: connection refused") == 1);  // once, not 60 times
  b.receiver.answer = WriteResult::ok();
  CHECK(r->step() == NotifyRunner::Step::sent);
  std::vector<std::string> want;
  for (int i = 0; i < 60; ++i) want.push_back(i % 2 == 0 ? "hot+" : "hot-");
  CHECK(b.names() == want);
  CHECK(r->status().queued == 0);
  CHECK(b.log.count("the receiver answers again after 60 failures") == 1);
}

TEST_CASE("notify: a refused batch is logged, counted and skipped") {
  Bench b;
  auto r = b.runner();
  b.store->log_alert_event(notice("hot", true, 100));
  b.store->flush(0, 0);
  b.receiver.answer = WriteResult::drop("400 Bad Request: unknown topic");
  CHECK(r->step() == NotifyRunner::Step::dropped);
  CHECK(r->status().dropped_total == 1);
  CHECK(r->status().last_error == "400 Bad Request: unknown topic");
  b.receiver.answer = WriteResult::ok();
  b.store->log_alert_event(notice("full", true, 101));
  b.store->flush(0, 0);
  CHECK(r->step() == NotifyRunner::Step::sent);
  CHECK(b.names() == std::vector<std::string>{"full+"});
}

TEST_CASE(
    "notify: only the alerts and severities it is told of, and the cursor moves past the rest") {
  Bench b;
  auto r = b.runner({"soc_*"}, Severity::warning);
  AlertNotice info = notice("soc_warm", true, 100);
  info.severity = Severity::info;
  b.store->log_alert_event(info);
  b.store->log_alert_event(notice("memory_low", true, 101));
  b.store->log_alert_event(notice("soc_hot", true, 102));
  b.store->flush(0, 0);
  CHECK(r->step() == NotifyRunner::Step::sent);
  CHECK(b.names() == std::vector<std::string>{"soc_hot+"});
  CHECK(r->acked() == 3);
}

TEST_CASE(
    "notify: a new notifier sends what fires now once, then repeats every interval, and a "
    "restart sends nothing twice") {
  Bench b;
  b.store->log_alert_event(notice("old", true, 50));  // before the notifier existed
  b.store->flush(0, 0);
  Alert hot;
  hot.name = "hot";
  hot.state = AlertState::firing;
  hot.severity = Severity::critical;
  hot.active_at = 90;
  b.firing = {hot};
  {
    auto r = b.runner();
    CHECK(r->step() == NotifyRunner::Step::sent);
    CHECK(b.names() == std::vector<std::string>{"hot+"});
    CHECK(r->step() == NotifyRunner::Step::idle);
    b.clock.advance(std::chrono::hours(4));
    CHECK(r->step() == NotifyRunner::Step::sent);
    CHECK(b.receiver.got.back().repeat);
    CHECK(b.receiver.got.size() == 2);
  }
  b.store->flush(0, 0);  // the cursor reaches the file
  b.store.reset();
  b.store = std::make_unique<Store>(b.db.path());
  auto again = b.runner();
  CHECK(again->step() == NotifyRunner::Step::idle);
  b.clock.advance(std::chrono::hours(1));
  CHECK(again->step() == NotifyRunner::Step::idle);
  CHECK(b.receiver.got.size() == 2);
}
