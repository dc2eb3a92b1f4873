// The alerts' memory in the history file: the state of every alert instance that is not inactive
// (so a restart neither forgets a firing alert nor notifies it again), and the log of their
// transitions (firing, resolved) that notifiers read from their cursors, oldest first. Kept in
// memory, written with the writer's next commit in its transaction (no write of its own), read
// back at open. Tables alert_state and alert_events (schema.hpp); one row per instance or event,
// its fields in one text column (encode()/decode() in alert_log.cpp).
#pragma once

#include <cstdint>
#include <deque>
#include <kiwi/model.hpp>
#include <mutex>
#include <optional>
#include <vector>

#include "store/sqlite.hpp"

namespace kiwi::agent {

class AlertLog {
 public:
  // Events kept at most (the oldest go first, acknowledged or not): a week of a rule flapping
  // once a minute.
  static constexpr std::size_t kMaxEvents = 10'000;

  // Any thread.
  std::vector<Alert> states() const;
  void set_states(std::vector<Alert> alerts);
  // Logs a transition; its sequence number (from 1, growing across restarts) is returned.
  std::uint64_t append(AlertNotice notice);
  // Committed events with a sequence after `after`, oldest first, at most `max`.
  std::vector<AlertNotice> events_after(std::uint64_t after, std::size_t max) const;
  // The newest committed event's sequence (0: none).
  std::uint64_t newest() const;
  // Events up to `sequence` are no longer needed (every notifier has them): forgotten, and
  // deleted from the file with the next commit.
  void forget_through(std::uint64_t sequence);

  // Writer thread: read the tables at open; StoreError with SQLite's message.
  void load(sql::Connection& db);
  // What the next commit writes, taken off the lists once its transaction is open.
  struct Batch {
    std::optional<std::vector<Alert>> states;
    std::vector<AlertNotice> events;
    std::uint64_t forget_through = 0;
  };
  Batch take();
  // Inside the commit's transaction; StoreError.
  static void write(sql::Connection& db, const Batch& batch);
  void committed(Batch batch);  // the transaction committed: its events are readable
  void put_back(Batch batch);   // it failed: written with the next commit
  void all_dirty();             // a new file (after a recovery) gets everything again

 private:
  mutable std::mutex mutex_;
  std::vector<Alert> states_;
  bool states_dirty_ = false;
  std::deque<AlertNotice> pending_;    // logged, not yet committed
  std::deque<AlertNotice> committed_;  // in the file, oldest first
  std::uint64_t next_sequence_ = 1;
  std::uint64_t forget_through_ = 0;  // deleted from the file with the next commit
  bool rewrite_events_ = false;       // all_dirty(): the committed events too
};

// One row's text and back (pure; alert_log.cpp). decode() returns nullopt for a row it cannot
// read (a later agent's), which is skipped.
std::string encode(const Alert& a);
std::string encode(const AlertNotice& n);
std::optional<Alert> decode_alert(std::string_view row);
std::optional<AlertNotice> decode_notice(std::string_view row);

}  // namespace kiwi::agent
