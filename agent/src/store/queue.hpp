// The ticks appended and not yet committed, oldest first. The writer appends to it and takes off
// what a commit wrote; queries, raw reads and the minute summary read it beside the file, so a tick
// is visible the moment it is appended (append() does no disk I/O).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace kiwi::agent {

class TickQueue {
 public:
  using Row = std::pair<std::int64_t, std::string>;  // ts (unix ms), sample_codec blob

  // Queues one tick; past `max_rows` the oldest goes (bounded memory while the disk fails).
  void push(std::int64_t ts, std::string blob, std::size_t max_rows) {
    std::lock_guard lock(mutex_);
    if (rows_.size() >= max_rows) rows_.erase(rows_.begin());
    rows_.emplace_back(ts, std::move(blob));
  }

  // Every row, copied: they stay queued (and visible to queries) until their commit is done.
  std::vector<Row> copy() const {
    std::lock_guard lock(mutex_);
    return rows_;
  }

  // Calls fn(ts, blob) for each row, oldest first, under the queue's lock (keep it short).
  template <class Fn>
  void for_each(Fn&& fn) const {
    std::lock_guard lock(mutex_);
    for (auto& [ts, blob] : rows_) fn(ts, blob);
  }

  // Takes off the rows up to `committed_until`, the newest ts a commit wrote. Rows appended while
  // that commit ran stay queued (push() only adds at the end, and drops from the front only when
  // the queue is full, which a successful commit makes impossible).
  void drop_until(std::int64_t committed_until) {
    std::lock_guard lock(mutex_);
    auto it = rows_.begin();
    while (it != rows_.end() && it->first <= committed_until) ++it;
    rows_.erase(rows_.begin(), it);
  }

  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return rows_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::vector<Row> rows_;
};

}  // namespace kiwi::agent
