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
  prepare(file_.delete_hour, "DELETE FROM hours WHERE ts BETWEEN ?1 AND ?2");
  prepare(file_.insert_hour, "INSERT OR REPLACE INTO hours(ts, data) VALUES(?1, ?2)");
  prepare(
      file_.prune_hours,
      "DELETE FROM hours WHERE ts IN (SELECT ts FROM hours WHERE ts < ?1 ORDER BY ts LIMIT ?2)");
  prepare(file_.hours_range, "SELECT ts, data FROM hours WHERE ts BETWEEN ?1 AND ?2 ORDER BY ts");
  prepare(file_.insert_day, "INSERT OR REPLACE INTO days(ts, data) VALUES(?1, ?2)");
  prepare(file_.delete_day, "DELETE FROM days WHERE ts BETWEEN ?1 AND ?2");
  prepare(file_.prune_days,
          "DELETE FROM days WHERE ts IN (SELECT ts FROM days WHERE ts < ?1 ORDER BY ts LIMIT ?2)");
  if (file_.ticks.prepare(file_.db, log_) != sql::kOk) fail("cannot prepare statement");
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
  // The hours after the newest hour row that have ticks were left unfolded (the agent stopped,
  // or was killed, inside them): open_hour() folds them from their ticks, and picks the minutes
  // of the hour it opens from them.
  // Without hour rows, every tick is (a new file has none, an older agent's its day of them).
  // A file without hour summaries but with minute summaries of days before the newest one (an
  // agent before them wrote it): those days are folded by the first commit.
  recover_from_ = INT64_MIN;
  unfolded_days_.clear();
  sql::Statement edges;
  if (edges.prepare(file_.db,
                    "SELECT (SELECT min(ts) FROM hours), (SELECT max(ts) FROM hours), "
                    "EXISTS(SELECT 1 FROM days)",
                    false) != sql::kOk)
    fail("cannot read hour rows");
  auto rows = edges.query();
  if (rows.next() && !rows.null(1)) {
    recover_from_ = floor_to(rows.int64(1), Store::kHourMs) + Store::kHourMs;
    if (rows.int64(2) == 0) {
      const std::int64_t last = floor_to(rows.int64(1), Store::kDayMs);
      for (std::int64_t d = floor_to(rows.int64(0), Store::kDayMs); d < last; d += Store::kDayMs)
        unfolded_days_.push_back(d);
    }
  }
  if (rows.failed()) fail("cannot read hour rows");
}

void Writer::fail(const std::string& what) const {
  throw file_.db.error(what);
}

void Writer::append(std::int64_t ts_ms, const std::vector<const MetricValue*>& metrics) {
  std::vector<std::pair<std::uint32_t, double>> values;
  series_.ids(metrics, values);

  const std::int64_t minute = floor_to(ts_ms, Store::kRollupMs);
  if (minute != minute_.start) {
    close_minute();
    const std::int64_t hour = floor_to(minute, Store::kHourMs);
    if (hour != hour_) open_hour(hour, minute);
    begin_minute(minute);
  }
  minute_.add(ts_ms, values);

  std::string blob;
  sample_codec::encode(blob, values);
  queue_.push(ts_ms, std::move(blob), Store::kMaxPendingRows);  // bounded memory
}

void Writer::commit(const Store::Cutoffs& cutoffs, int prune_rows) {
  // Copied: queries keep seeing them until they are committed.
  const std::vector<TickQueue::Row> rows = queue_.copy();
  const SeriesTable::View catalog = series_.view();
  // New series go to the file with the hour's fold, or once carrying them would add more than
  // kMaxCarriedBytes to each record: until then every record carries them (series_table.hpp),
  // and a commit that has nothing else for SQLite writes nothing to it (no WAL frame, no sync).
  std::string carry = series_committed_ < catalog->size() ? series_.carry(series_committed_) : "";
  const bool write_series = !carry.empty() && (carry.size() > kMaxCarriedBytes ||
                                               !closed_hours_.empty() || !unfolded_days_.empty());
  file_.db.exec("BEGIN");
  // Taken once the transaction is open: a BEGIN that fails leaves them to the next commit.
  const Cursors::Map cursors = cursors_.take_dirty();
  AlertLog::Batch alerts = alerts_.take();
  try {
    AlertLog::write(file_.db, alerts);
    for (auto& [name, acked] : cursors)
      if (file_.insert_cursor.execute(name, acked) != sql::kDone)
        fail("cannot write output cursor " + name);
    if (write_series) insert_series(*catalog);
    for (std::int64_t day : unfolded_days_) fold_day(day);
    // The prune before the hour's fold: the leaves it empties are written to the WAL either way
    // (SQLite writes a freed page it has changed), and the fold's new rows then take those pages
    // from the free list, where they would otherwise dirty pages freed an hour before: 21 frames
    // at an hour's fold of a year-sized file, not 30 (docs/benchmarks.md).
    if (prune_rows > 0) prune(cutoffs, prune_rows);
    write_hours();
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
  unfolded_days_.clear();
  if (write_series) {
    series_committed_ = catalog->size();
    carry.clear();
  }
  if (!closed_hours_.empty()) {
    closed_hours_.clear();
    publish();
  }
  // With the series they name that the file has not (`carry`). A failure (StoreError) leaves the
  // rows queued for the next commit.
  write_ticks(rows, carry);
  queue_.drop_until(rows.empty() ? INT64_MIN : rows.back().first);
}

void Writer::insert_series(const SeriesCatalog& catalog) {
  for (std::size_t i = series_committed_; i < catalog.size(); ++i) {
    auto& s = catalog[i];
    if (file_.insert_series.execute(static_cast<std::int64_t>(i + 1), s.name,
                                    canonical_labels(s.labels), s.unit,
                                    static_cast<int>(s.kind)) != sql::kDone)
      fail("cannot add series " + s.key);
  }
}

void Writer::commit_series() {
  const SeriesTable::View catalog = series_.view();
  if (!is_open() || series_committed_ >= catalog->size()) return;
  file_.db.exec("BEGIN");
  try {
    insert_series(*catalog);
    file_.db.exec("COMMIT");
  } catch (...) {
    file_.db.try_exec("ROLLBACK");
    throw;
  }
  series_committed_ = catalog->size();
}

void Writer::write_ticks(const std::vector<TickQueue::Row>& rows, const std::string& carry) {
  // One block per commit (more only for a queue longer than kMaxBlockSpanMs, or one whose
  // ticks do not rise: the collector's always do, a caller's might not).
  for (std::size_t i = 0, j; i < rows.size(); i = j) {
    for (j = i + 1; j < rows.size() && rows[j].first > rows[j - 1].first &&
                    rows[j].first - rows[i].first < kMaxBlockSpanMs;)
      ++j;
    const std::string block = sample_codec::pack_block(rows[i].first, &rows[i], &rows[0] + j);
    log_.append(rows[i].first, rows[j - 1].first, static_cast<std::uint32_t>(j - i), carry, block);
  }
}

// The hours closed since the last commit, as hour rows; then the day rows of each day they are
// in, unless that is the day in progress (its rows go: it is folded when it is over). Usually
// one hour, once an hour; several after a restart that found hours unfolded, or when the clock
// went back into an hour already folded (its rows are made again, whole, from its ticks).
void Writer::write_hours() {
  std::vector<std::int64_t> days;
  for (auto& [hour, minutes] : closed_hours_) {
    fold_hour(hour, minutes);
    const std::int64_t d = floor_to(hour, Store::kDayMs);
    if (std::find(days.begin(), days.end(), d) == days.end()) days.push_back(d);
  }
  for (std::int64_t d : days)
    if (hour_ == INT64_MIN || d != floor_to(hour_, Store::kDayMs))
      fold_day(d);
    else
      step_range(file_.delete_day, d, d + Store::kDayMs - 1, "cannot write day rows");
}

void Writer::step_range(sql::Statement& st, std::int64_t a, std::int64_t b, const char* what) {
  if (st.execute(a, b) != sql::kDone) fail(what);
}

int Writer::prune(const Store::Cutoffs& cutoffs, int max_rows) {
  int deleted = 0;
  // Each tier goes at its own cutoff, from the left edge of its table: the tick log's whole files
  // (what is left of a file before the cutoff reads as gone), and a version-5 file's blocks,
  // which hold a tick or more, so max_rows of them are at least max_rows ticks. Minute rows go at
  // 1/60 of that pace per group (a minute is a row per kGroupSeries series): queries read a folded
  // hour from its hour rows, so they outlive the raw ticks only in an hour that was not folded.
  // Hour rows go a whole hour at a time (series + 1 rows) once their hour has ended before the
  // minutes' cutoff, day rows a whole day at a time once it has ended before the hours' cutoff.
  const int groups = static_cast<int>(series_.size() / Store::kGroupSeries + 1);
  const int series_rows = static_cast<int>(series_.size() + 1);
  auto run = [&](sql::Statement& st, std::int64_t cut, int rows) {
    if (st.execute(cut, rows) != sql::kDone) fail("cannot prune old samples");
    deleted += file_.db.changes();
  };
  // Whole `span`s that end by `cut` (a tier keeps up to one span longer than its retention).
  auto whole = [](std::int64_t cut, std::int64_t span) {
    return cut < INT64_MIN + span ? INT64_MIN : floor_to(cut, span);
  };
  // No tier goes past what the next one has taken from it: the ticks of the hour in progress
  // (or of the hours found unfolded at open) make its minute summaries again after a restart,
  // and the minute summaries of the day in progress make its hour summaries when it is over. So
  // a `retention` under an hour keeps ticks back to the hour's start, a `minute_retention`
  // under a day minutes back to the day's. The prune runs before the commit's fold (commit()
  // says why), so the minutes of a day that fold makes day rows of are kept too, for one commit.
  const std::int64_t unfolded = hour_ != INT64_MIN ? hour_ : recover_from_;
  std::int64_t folding = unfolded;
  for (auto& closed : closed_hours_) folding = std::min(folding, closed.first);
  const std::int64_t raw = std::min(cutoffs.raw, unfolded);
  const std::int64_t minutes = folding == INT64_MIN
                                   ? INT64_MIN
                                   : std::min(cutoffs.minutes, floor_to(folding, Store::kDayMs));
  deleted += log_.prune(raw);
  run(file_.prune, raw, max_rows);
  run(file_.prune_rows, raw, max_rows);
  run(file_.prune_rollups, raw, (max_rows / 60 + 1) * groups);
  run(file_.prune_hours, whole(minutes, Store::kHourMs), series_rows);
  run(file_.prune_days, whole(cutoffs.hours, Store::kDayMs), series_rows);
  return deleted;
}

}  // namespace kiwi::agent
