// Output cursors ([[remote_write]]: the newest sample a receiver acknowledged), kept in memory and
// in the file's output_cursors table. Read at open; set() takes effect in memory at once and
// reaches the file with the writer's next commit, in its transaction (no write of its own).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "store/sqlite.hpp"

namespace kiwi::agent {

class Cursors {
 public:
  using Map = std::map<std::string, std::int64_t>;

  // Any thread.
  std::optional<std::int64_t> get(const std::string& output) const;
  void set(const std::string& output, std::int64_t acked_ms);

  // Writer thread. Reads the table of `db` (at open); StoreError with SQLite's message.
  void load(sql::Connection& db);
  // The cursors set since the last commit, for the next commit to write (taken off the list).
  Map take_dirty();
  // A commit that failed: its cursors go back on the list, unless set again meanwhile (newer
  // wins).
  void put_back(const Map& cursors);
  // Every cursor on the list: a new file (after a recovery) gets them all with its next commit.
  void all_dirty();

 private:
  mutable std::mutex mutex_;
  Map cursors_;
  Map dirty_;  // set since the last commit
};

}  // namespace kiwi::agent
