#include "store/writer.hpp"

#include <algorithm>

#include "store/millis.hpp"
#include "store/schema.hpp"
#include "store/store.hpp"

namespace kiwi::agent {

void Writer::prepare() {
  auto prepare = [&](sql::Statement& st, const char* text) {
    if (st.prepare(file_.db, text) != sql::kOk) fail("cannot prepare statement");
  };
  prepare(file_.insert_block,
          "INSERT OR REPLACE INTO blocks(ts, last, ticks, data) VALUES(?1, ?2, ?3, ?4)");
  prepare(file_.insert_rollup, "INSERT OR REPLACE INTO rollups(ts, data) VALUES(?1, ?2)");
  prepare(file_.delete_minute, "DELETE FROM rollups WHERE ts BETWEEN ?1 AND ?2");
  prepare(file_.delete_hour, "DELETE FROM hours WHERE ts BETWEEN ?1 AND ?2");
  prepare(file_.insert_hour, "INSERT OR REPLACE INTO hours(ts, data) VALUES(?1, ?2)");
  prepare(
      file_.prune_hours,
      "DELETE FROM hours WHERE ts IN (SELECT ts FROM hours WHERE ts < ?1 ORDER BY ts LIMIT ?2)");
  prepare(file_.rollup_next,
          "SELECT ts, data FROM rollups WHERE ts BETWEEN ?1 AND ?2 ORDER BY ts LIMIT 1");
  prepare(file_.rollup_at, "SELECT data FROM rollups WHERE ts = ?1");
  prepare(file_.oldest_hour, "SELECT ts FROM hours ORDER BY ts LIMIT 1");
  if (file_.ticks.prepare(file_.db) != sql::kOk) fail("cannot prepare statement");
  prepare(file_.prune_rollups,
          "DELETE FROM rollups WHERE ts IN (SELECT ts FROM rollups WHERE ts < ?1 ORDER BY ts "
          "LIMIT ?2)");
  prepare(file_.insert_series,
          "INSERT INTO series(id, name, labels, unit, kind) VALUES(?1, ?2, ?3, ?4, ?5)");
  prepare(file_.insert_cursor,
          "INSERT OR REPLACE INTO output_cursors(name, acked_ms) VALUES(?1, ?2)");
  prepare(file_.prune,
          "DELETE FROM blocks WHERE ts IN (SELECT ts FROM blocks WHERE ts < ?1 AND last < ?1 "
          "ORDER BY ts LIMIT ?2)");
  prepare(file_.prune_rows,
          "DELETE FROM samples WHERE ts IN (SELECT ts FROM samples WHERE ts < ?1 ORDER BY ts "
          "LIMIT ?2)");
  // The hour of the newest minute row: folded when a minute of a later hour is written.
  sql::Statement m;
  rollup_hour_ = INT64_MIN;
  if (m.prepare(file_.db, "SELECT max(ts) FROM rollups", false) != sql::kOk)
    fail("cannot read rollups");
  auto rows = m.query();
  if (rows.next() && !rows.null(0)) rollup_hour_ = floor_to(rows.int64(0), Store::kHourMs);
}

void Writer::fail(const std::string& what) const {
  throw file_.db.error(what);
}

void Writer::append(std::int64_t ts_ms, const std::vector<const MetricValue*>& metrics) {
  std::vector<std::pair<std::uint32_t, double>> values;
  series_.ids(metrics, values);

  const std::int64_t minute = floor_to(ts_ms, Store::kRollupMs);
  if (minute != minute_start_) {
    close_minute();
    begin_minute(minute);
  }
  add_to_minute(ts_ms, values);

  std::string blob;
  sample_codec::encode(blob, values);
  queue_.push(ts_ms, std::move(blob), Store::kMaxPendingRows);  // bounded memory
}

void Writer::commit(std::int64_t cutoff_ms, int prune_rows) {
  // Copied: queries keep seeing them until they are committed.
  const std::vector<TickQueue::Row> rows = queue_.copy();
  const SeriesTable::View catalog = series_.view();
  std::int64_t hour = rollup_hour_;  // of the newest minute row, as it will be after this commit
  file_.db.exec("BEGIN");
  // Taken once the transaction is open: a BEGIN that fails leaves them to the next commit.
  const Cursors::Map cursors = cursors_.take_dirty();
  AlertLog::Batch alerts = alerts_.take();
  try {
    AlertLog::write(file_.db, alerts);
    for (auto& [name, acked] : cursors)
      if (file_.insert_cursor.execute(name, acked) != sql::kDone)
        fail("cannot write output cursor " + name);
    for (std::size_t i = series_committed_; i < catalog->size(); ++i) {
      auto& s = (*catalog)[i];
      if (file_.insert_series.execute(static_cast<std::int64_t>(i + 1), s.name,
                                      canonical_labels(s.labels), s.unit,
                                      static_cast<int>(s.kind)) != sql::kDone)
        fail("cannot add series " + s.key);
    }
    write_ticks(rows);
    hour = write_minutes();
    if (prune_rows > 0) prune(cutoff_ms, prune_rows);
    file_.db.exec("COMMIT");
  } catch (...) {
    const int code = file_.db.errcode();
    file_.db.try_exec("ROLLBACK");
    cursors_.put_back(cursors);
    alerts_.put_back(std::move(alerts));
    if (!sql::malformed(code)) throw;
    try {
      throw;
    } catch (const std::exception& e) {
      throw Malformed(e.what());
    }
  }
  alerts_.committed(std::move(alerts));
  series_committed_ = catalog->size();
  pending_rollups_.clear();
  rollup_hour_ = hour;
  queue_.drop_until(rows.empty() ? INT64_MIN : rows.back().first);
}

void Writer::write_ticks(const std::vector<TickQueue::Row>& rows) {
  // One block per commit (more only for a queue longer than kMaxBlockSpanMs, or one whose
  // ticks do not rise: the collector's always do, a caller's might not).
  for (std::size_t i = 0, j; i < rows.size(); i = j) {
    for (j = i + 1; j < rows.size() && rows[j].first > rows[j - 1].first &&
                    rows[j].first - rows[i].first < kMaxBlockSpanMs;)
      ++j;
    const std::string block = sample_codec::pack_block(rows[i].first, &rows[i], &rows[0] + j);
    if (file_.insert_block.execute(rows[i].first, rows[j - 1].first,
                                   static_cast<std::int64_t>(j - i),
                                   sql::Blob{block}) != sql::kDone)
      fail("cannot write samples");
  }
}

std::int64_t Writer::write_minutes() {
  std::int64_t hour = rollup_hour_;
  // A minute replaces every row it had (a rewrite after a restart inside it, or after the
  // clock went back), and opens its hour again: that hour's rows go, and it is folded anew
  // when a minute of another hour is written. Both deletes find nothing in the usual case (a
  // new minute of the open hour) and then write nothing.
  for (auto& pm : pending_rollups_) {
    const std::int64_t h = floor_to(pm.minute, Store::kHourMs);
    step_range(file_.delete_hour, h, h + Store::kHourMs - 1, "cannot write rollups");
    step_range(file_.delete_minute, pm.minute, pm.minute + Store::kRollupMs - 1,
               "cannot write rollups");
    for (std::size_t g = 0; g < pm.groups.size(); ++g) {
      const std::string& blob = pm.groups[g];
      if (blob.empty()) continue;
      if (file_.insert_rollup.execute(pm.minute + static_cast<std::int64_t>(g), sql::Blob{blob}) !=
          sql::kDone)
        fail("cannot write rollups");
    }
    // The hour of the minute before is over (or the clock went back out of it): fold it. Also
    // an hour the agent left when it stopped, on the first minute after a restart.
    if (hour != INT64_MIN && h != hour) fold_hour(hour);
    hour = h;
  }
  return hour;
}

void Writer::step_range(sql::Statement& st, std::int64_t a, std::int64_t b, const char* what) {
  if (st.execute(a, b) != sql::kDone) fail(what);
}

int Writer::prune(std::int64_t cutoff_ms, int max_rows) {
  int deleted = 0;
  // Blocks hold a tick or more, so max_rows of them are at least max_rows ticks. Rollups go at
  // 1/60 of that pace per group (a minute is a row per kGroupSeries series). Hour rows go a whole
  // hour at a time (series + 1 rows, the table's left edge) once their hour starts before the
  // cutoff; the minutes of it that are left are then read from their minute rows. Minute rows of
  // an hour that still has hour rows stay (with more hours behind than a commit prunes): the two
  // would disagree.
  const int groups = static_cast<int>(series_.size() / Store::kGroupSeries + 1);
  const int hour_rows = static_cast<int>(series_.size() + 1);
  auto run = [&](sql::Statement& st, std::int64_t cut, int rows) {
    if (st.execute(cut, rows) != sql::kDone) fail("cannot prune old samples");
    deleted += file_.db.changes();
  };
  run(file_.prune, cutoff_ms, max_rows);
  run(file_.prune_rows, cutoff_ms, max_rows);
  run(file_.prune_hours,
      cutoff_ms == INT64_MIN ? cutoff_ms : floor_to(cutoff_ms - 1, Store::kHourMs) + Store::kHourMs,
      hour_rows);
  std::int64_t cut = cutoff_ms;
  {
    auto rows = file_.oldest_hour.query();
    if (rows.next()) cut = std::min(cut, floor_to(rows.int64(0), Store::kHourMs));
    if (rows.failed()) fail("cannot prune old samples");
  }
  run(file_.prune_rollups, cut, (max_rows / 60 + 1) * groups);
  return deleted;
}

}  // namespace kiwi::agent
