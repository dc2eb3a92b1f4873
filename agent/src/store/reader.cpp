#include "store/reader.hpp"

#include <algorithm>

#include "store/schema.hpp"

namespace kiwi::agent {

int FoldedStatements::prepare(sql::Connection& db, const char* table) {
  const std::string t = table;
  int rc = at.prepare(db, ("SELECT data FROM " + t + " WHERE ts = ?1").c_str());
  if (rc == sql::kOk)
    rc = range.prepare(
        db, ("SELECT ts, data FROM " + t + " WHERE ts BETWEEN ?1 AND ?2 ORDER BY ts").c_str());
  if (rc == sql::kOk)
    rc = next.prepare(
        db, ("SELECT ts FROM " + t + " WHERE ts BETWEEN ?1 AND ?2 ORDER BY ts LIMIT 1").c_str());
  return rc;
}

ReadConnection::ReadConnection(const std::string& path, const TickLog& log) {
  int rc = db_.open(path, sql::Access::read_only, history_vfs());
  if (rc == sql::kOk) {
    db_.busy_timeout(1000);
    rc = db_.try_exec(kCacheSizePragma);
  }
  if (rc == sql::kOk) rc = ticks_.prepare(db_, log);
  if (rc == sql::kOk)
    rc = rollups_.prepare(db_,
                          "SELECT ts, data FROM rollups WHERE ts BETWEEN ?1 AND ?2 ORDER BY ts");
  if (rc == sql::kOk)
    rc = rollup_next_.prepare(db_,
                              "SELECT ts, data FROM rollups WHERE ts BETWEEN ?1 AND ?2 ORDER BY ts "
                              "LIMIT 1");
  if (rc == sql::kOk) rc = rollup_at_.prepare(db_, "SELECT data FROM rollups WHERE ts = ?1");
  if (rc == sql::kOk) rc = hours_.prepare(db_, "hours");
  if (rc == sql::kOk) rc = days_.prepare(db_, "days");
  if (rc == sql::kOk)
    rc = bounds_.prepare(db_,
                         "SELECT (SELECT ts FROM samples ORDER BY ts LIMIT 1), "
                         "(SELECT ts FROM blocks ORDER BY ts LIMIT 1), "
                         "(SELECT ts FROM rollups ORDER BY ts LIMIT 1), "
                         "(SELECT ts FROM hours ORDER BY ts LIMIT 1), "
                         "(SELECT ts FROM days ORDER BY ts LIMIT 1)");
  if (rc == sql::kOk)
    rc = count_after_.prepare(db_,
                              "SELECT (SELECT coalesce(sum(ticks), 0) FROM blocks WHERE ts > ?1), "
                              "(SELECT max(last) FROM blocks WHERE ts > ?1), "
                              "(SELECT count(*) FROM samples WHERE ts > ?1), "
                              "(SELECT max(ts) FROM samples WHERE ts > ?1)");
  if (rc != sql::kOk) throw StoreError(path + ": " + db_.message());
}

std::unique_ptr<ReadConnection> ReadPool::borrow() {
  std::uint64_t generation;
  {
    std::lock_guard lock(mutex_);
    if (!pool_.empty()) {
      auto conn = std::move(pool_.back());
      pool_.pop_back();
      return conn;
    }
    generation = generation_;
  }
  auto conn = std::make_unique<ReadConnection>(path_, log_);
  conn->generation = generation;
  return conn;
}

void ReadPool::give_back(std::unique_ptr<ReadConnection> conn) {
  std::lock_guard lock(mutex_);
  if (conn->generation != generation_) return;  // opened on a file since moved aside
  pool_.push_back(std::move(conn));
}

void ReadPool::discard() {
  std::lock_guard lock(mutex_);
  ++generation_;
  pool_.clear();
}

void ReadPool::clear() {
  std::lock_guard lock(mutex_);
  pool_.clear();
}

std::vector<Store::RawTick> read_raw(ReadPool& pool, const TickQueue& queue, std::int64_t after_ms,
                                     std::size_t max_values, bool* more) {
  std::vector<Store::RawTick> out;
  std::size_t values = 0;
  bool full = false;
  if (more) *more = false;
  // Adds one row; false once the batch is full.
  auto add = [&](std::int64_t ts, std::string_view blob) {
    Store::RawTick tick{ts, {}};
    try {
      sample_codec::decode(blob,
                           [&](std::uint32_t id, double v) { tick.values.emplace_back(id, v); });
    } catch (const StoreError&) {
      return true;  // a damaged row is skipped, as queries skip it
    }
    if (!out.empty() && values + tick.values.size() > max_values) {
      full = true;
      return false;
    }
    values += tick.values.size();
    out.push_back(std::move(tick));
    return true;
  };
  // The queue is copied first: a flush that commits rows (and takes them off the queue) while the
  // file is read leaves them in this copy, so none falls between the two reads.
  std::vector<TickQueue::Row> queued;
  queue.for_each([&](std::int64_t ts, const std::string& blob) {
    if (ts > after_ms) queued.emplace_back(ts, blob);
  });
  auto conn = pool.borrow();
  std::int64_t last = after_ms;
  if (after_ms < INT64_MAX) {
    scan_ticks(conn->db(), conn->ticks(), after_ms + 1, INT64_MAX, false,
               [&](std::int64_t ts, std::string_view blob) {
                 if (!add(ts, blob)) return false;
                 last = ts;
                 return true;
               });  // an error drops the connection with the exception
  }
  pool.give_back(std::move(conn));
  if (more) *more = full;
  if (full) return out;
  // Queued rows are newer than committed ones; a row both committed and queued is read once.
  for (auto& [ts, blob] : queued)
    if (ts > last && !add(ts, blob)) break;
  if (more) *more = full;
  return out;
}

std::pair<std::uint64_t, std::int64_t> ticks_after(ReadPool& pool, const TickQueue& queue,
                                                   std::int64_t after_ms) {
  auto conn = pool.borrow();
  std::uint64_t n = 0;
  std::int64_t newest = INT64_MIN;
  if (auto rows = conn->count_after().query(after_ms); rows.next()) {
    n = static_cast<std::uint64_t>(rows.int64(0) + rows.int64(2));
    for (int c : {1, 3})
      if (!rows.null(c)) newest = std::max<std::int64_t>(newest, rows.int64(c));
  }
  // A block that starts at or before after_ms may end after it: its later ticks count too.
  std::string buf;
  std::vector<std::pair<std::int64_t, std::string_view>> ticks;
  auto straddling = [&](std::string_view block, std::int64_t ts) {
    if (sample_codec::unpack_block(block, ts, buf, ticks))
      for (auto& t : ticks)
        if (t.first > after_ms) ++n, newest = std::max(newest, t.first);
  };
  if (after_ms < INT64_MAX) {
    auto rows = conn->ticks().blocks_up.query(minus_saturating(after_ms, kMaxBlockSpanMs), after_ms,
                                              after_ms + 1);
    while (rows.next()) straddling(rows.blob(1), rows.int64(0));
    conn->ticks().log->blocks(after_ms + 1, INT64_MAX, false, [&](const TickLog::Block& b) {
      if (b.ts > after_ms)
        n += b.ticks, newest = std::max(newest, b.last);
      else
        straddling(b.data, b.ts);
      return true;
    });
  }
  pool.give_back(std::move(conn));
  queue.for_each([&](std::int64_t ts, const std::string&) {
    if (ts > after_ms && ts > newest) {
      ++n;
      newest = ts;
    }
  });
  return {n, newest};
}

}  // namespace kiwi::agent
