// /api/fleet: one row per board, this one and each [[peer]] (docs/fleet.md). Every agent answers
// its own row (?scope=self, what a peer asks for); one with peers asks each of them once per
// `interval`, all at once on one thread, while someone is looking (a request in the last minute),
// however many browsers are open: a request reads the rows the last round left.
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <kiwi/handler.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fleet_row.hpp"
#include "peer_http.hpp"

namespace {

using Clock = std::chrono::steady_clock;

constexpr kiwi::OptionSpec kOptions[] = {
    {"interval", kiwi::OptionType::duration, "\"5s\"",
     "each peer is asked for its row this often while someone looks at the fleet", true, 1000,
     3'600'000},
};

// How long the first request after a quiet spell waits for the round it starts.
constexpr auto kFirstWait = std::chrono::seconds(1);

// A peer's answer at most: its row is a few hundred bytes.
constexpr std::size_t kMaxRowBody = 64 * 1024;

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What is known of one peer: the last round's outcome and the last values it sent.
struct PeerState {
  std::string status = "unreachable";
  std::string error = "not asked yet";
  std::optional<double> last_seen_ms;  // our clock, its last good answer
  std::optional<kiwi_fleet::BoardValues> values;
};

class FleetHandler final : public kiwi::Handler {
 public:
  explicit FleetHandler(const kiwi::HandlerContext& ctx)
      : data_(ctx.data),
        interval_(ctx.options.get_duration("interval")),
        idle_after_(std::max<Clock::duration>(std::chrono::minutes(1), 3 * interval_)),
        user_agent_("kiwi-agent/" + std::string(ctx.agent_version)) {
    for (const kiwi::Peer& p : ctx.peers) {
      clients_.push_back(std::make_unique<kiwi_http::PeerClient>(p, user_agent_));
    }
    states_.resize(clients_.size());
    if (!clients_.empty()) thread_ = std::thread([this] { run(); });
  }

  ~FleetHandler() override {
    stop_ = true;  // a round in progress ends within 100 ms
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  kiwi::Response handle(const kiwi::Request& req) override {
    for (const auto& p : req.query)
      if (p.name != "scope")
        return kiwi::Response::error(400, "unknown parameter; accepted: scope", p.name);
    const auto scope = req.param("scope").value_or("all");
    if (req.count("scope") > 1 || (scope != "all" && scope != "self"))
      return kiwi::Response::error(400, "must be \"all\" (every board) or \"self\" (this one)",
                                   "scope");
    const double now = now_ms();
    const auto snapshot = data_.snapshot();
    const auto alerts = data_.alerts();
    const auto self = kiwi_fleet::board_values(*snapshot, alerts, now);

    std::vector<PeerState> peers;
    if (scope == "all" && !clients_.empty()) peers = demand();

    std::string body = "{\"interval_ms\":" + std::to_string(interval_.count()) +
                       ",\"generated_ms\":" + std::to_string(static_cast<std::int64_t>(now)) +
                       ",\"boards\":[";
    kiwi_fleet::RowMeta meta;
    meta.name = snapshot->host;
    meta.self = true;
    meta.status = self.stale ? "stale" : "up";
    meta.error = self.stale ? "no new sample within its stale_after" : "";
    if (snapshot->sequence != 0) meta.last_seen_ms = self.timestamp_ms;
    kiwi_fleet::append_row(body, meta, &self);
    for (std::size_t i = 0; i < peers.size(); ++i) {
      const PeerState& s = peers[i];
      kiwi_fleet::RowMeta m;
      m.name = clients_[i]->name();
      m.url = clients_[i]->url();
      m.status = s.status;
      m.error = s.error;
      m.last_seen_ms = s.last_seen_ms;
      body += ',';
      kiwi_fleet::append_row(body, m, s.values ? &*s.values : nullptr);
    }
    body += "]}";
    kiwi::Response res;
    res.headers = {{"Cache-Control", "no-store"}};
    res.body = std::make_shared<const std::string>(std::move(body));
    return res;
  }

 private:
  // Marks that someone looks (the poller runs while they do) and copies the peers' states. After
  // a quiet spell the rows are old, or there are none: a round starts now, and this waits for it
  // up to kFirstWait (an HTTP worker waits here; a peer that does not answer within it is shown
  // as not asked yet, and the page asks again within an interval).
  std::vector<PeerState> demand() {
    std::unique_lock lock(mutex_);
    const bool was_idle = idle();
    last_demand_ = Clock::now();
    if (was_idle) {
      want_round_ = true;
      wake_.notify_all();
      const std::uint64_t next = rounds_ + 1;
      done_.wait_for(lock, kFirstWait, [&] { return rounds_ >= next || stopping_; });
    }
    return states_;
  }

  void run() {
    pthread_setname_np(pthread_self(), "kiwi-fleet");  // its CPU shows by name (top -H, bench)
    std::vector<const kiwi_http::PeerClient*> clients;
    for (auto& c : clients_) clients.push_back(c.get());
    std::unique_ptr<kiwi_http::PeerRounds> rounds;  // its connections stay open between rounds
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      if (idle()) {  // nobody looks: sleep until someone does
        wake_.wait(lock, [&] { return stopping_ || !idle(); });
        continue;
      }
      want_round_ = false;
      const auto began = Clock::now();
      lock.unlock();
      std::vector<kiwi_http::Fetched> answers;
      try {
        if (!rounds) rounds = std::make_unique<kiwi_http::PeerRounds>();
        answers = rounds->get_all(clients, "/api/fleet?scope=self", kMaxRowBody, stop_);
      } catch (const std::exception& e) {  // every peer gets the reason; the next round tries
        answers.assign(clients.size(), kiwi_http::Fetched{});
        for (auto& a : answers) a.error = e.what();
      }
      const double now = now_ms();
      lock.lock();
      for (std::size_t i = 0; i < answers.size(); ++i) update(states_[i], answers[i], now);
      ++rounds_;
      done_.notify_all();
      wake_.wait_until(lock, began + interval_, [&] { return stopping_ || want_round_; });
    }
  }

  // Whether nobody asked for the fleet within idle_after_ (under mutex_).
  bool idle() const { return !last_demand_ || Clock::now() - *last_demand_ > idle_after_; }

  // One peer's state after an answer (or none) at `now` (unix ms).
  void update(PeerState& s, const kiwi_http::Fetched& f, double now) const {
    std::string why;
    bool auth = false;
    if (!f.answered()) {
      why = f.error;
    } else if (f.status == 401 || f.status == 403) {
      why = "HTTP " + std::to_string(f.status) + ": the peer refused our credentials";
      auth = true;
    } else if (f.status != 200) {
      why = "HTTP " + std::to_string(f.status) + " from /api/fleet";
    } else if (auto values = kiwi_fleet::parse_self_answer(f.body, why)) {
      s.values = std::move(values);
      s.last_seen_ms = now;
      s.status = s.values->stale ? "stale" : "up";
      s.error = s.values->stale ? "the peer answers, but has no new sample" : "";
      return;
    }
    s.error = why;
    const double stale_ms = 3.0 * static_cast<double>(interval_.count());
    s.status = auth                                                 ? "auth_failed"
               : s.last_seen_ms && now - *s.last_seen_ms < stale_ms ? "stale"
                                                                    : "unreachable";
  }

  const kiwi::DataSource& data_;
  const std::chrono::milliseconds interval_;
  const Clock::duration idle_after_;
  const std::string user_agent_;
  std::vector<std::unique_ptr<kiwi_http::PeerClient>> clients_;

  std::mutex mutex_;  // guards what follows
  std::condition_variable wake_, done_;
  std::vector<PeerState> states_;
  std::uint64_t rounds_ = 0;
  std::optional<Clock::time_point> last_demand_;
  bool want_round_ = false;  // someone came after a quiet spell: a round now, not at the interval
  std::atomic<bool> stop_{false};
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace

KIWI_HANDLER_PLUGIN(FleetHandler, "fleet",
                    "every board's row: this one and each [[peer]]'s (/api/fleet)", kOptions)
