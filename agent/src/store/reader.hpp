// The read side: read-only connections, pooled for the HTTP workers (at most one per worker
// thread at a time), and the raw reads of the outputs (remote write). Queries (query.hpp) borrow
// their connection here too.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "store/queue.hpp"
#include "store/sqlite.hpp"
#include "store/store.hpp"
#include "store/ticks.hpp"

namespace kiwi::agent {

// The statements of a table of rows keyed unit + series id (hours, days; schema.hpp).
struct FoldedStatements {
  sql::Statement at;     // the row at ts = ?1 (data)
  sql::Statement range;  // rows with ?1 <= ts <= ?2 (ts, data), oldest first
  sql::Statement next;   // the first row's ts with ?1 <= ts <= ?2
  int prepare(sql::Connection& db, const char* table);
};

// A read-only connection (SQLITE_OPEN_READONLY): any write through it fails.
class ReadConnection {
 public:
  // `log`: the tick log beside the file, which outlives the connection.
  ReadConnection(const std::string& path, const TickLog& log);  // throws StoreError
  ReadConnection(const ReadConnection&) = delete;
  ReadConnection& operator=(const ReadConnection&) = delete;
  sql::Connection& db() { return db_; }
  std::uint64_t generation = 0;  // the store's pool generation it was opened in
  TickStatements& ticks() { return ticks_; }
  sql::Statement& rollups() { return rollups_; }  // ?1 since ?2 until, oldest first
  // The first rollup row with ?1 <= ts <= ?2 (ts, data), and the row at ts = ?1 (data).
  sql::Statement& rollup_next() { return rollup_next_; }
  sql::Statement& rollup_at() { return rollup_at_; }
  FoldedStatements& hours() { return hours_; }
  FoldedStatements& days() { return days_; }
  // One row: the oldest tick row ts, the oldest block ts, the oldest rollup ts, the oldest hour
  // row ts, the oldest day row ts (each NULL if none).
  sql::Statement& bounds() { return bounds_; }
  // One row, of what has ts > ?1: ticks in the blocks table, the newest block's last tick, tick
  // rows, the newest tick row (NULL if none).
  sql::Statement& count_after() { return count_after_; }

 private:
  sql::Connection db_;
  TickStatements ticks_;
  sql::Statement rollups_;
  sql::Statement rollup_next_;
  sql::Statement rollup_at_;
  FoldedStatements hours_;
  FoldedStatements days_;
  sql::Statement bounds_;
  sql::Statement count_after_;
};

// Read-only connections not in use; a worker takes one, returns it after its query. A recovery
// bumps the generation: connections to the file moved aside are closed on return.
class ReadPool {
 public:
  ReadPool(std::string path, const TickLog& log) : path_(std::move(path)), log_(log) {}
  // A connection of the pool, or a new one (StoreError). One that saw an error is not given back:
  // it is closed with the exception that drops it.
  std::unique_ptr<ReadConnection> borrow();
  void give_back(std::unique_ptr<ReadConnection> conn);
  // The file was moved aside: close the pooled connections, and those lent out on their return.
  void discard();
  void clear();

 private:
  const std::string path_;
  const TickLog& log_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<ReadConnection>> pool_;
  std::uint64_t generation_ = 0;  // guarded by mutex_
};

// Store::read_raw() and Store::ticks_after() (store.hpp), on a connection of `pool` and `queue`.
std::vector<Store::RawTick> read_raw(ReadPool& pool, const TickQueue& queue, std::int64_t after_ms,
                                     std::size_t max_values, bool* more);
std::pair<std::uint64_t, std::int64_t> ticks_after(ReadPool& pool, const TickQueue& queue,
                                                   std::int64_t after_ms);

}  // namespace kiwi::agent
