// The query side: Store::query() (the window and buckets it asks for), read from the blocks, the
// minute and hour rows, and the queue, through a connection of the read pool. Buckets adds what
// is read up; Window decides what to read (raw ticks, minute rows, hour rows) and reads it.
#include "store/query.hpp"

#include <kiwi/glob.hpp>

#include <algorithm>
#include <cmath>

#include "store/millis.hpp"
#include "store/rollup.hpp"
#include "store/sample_codec.hpp"

namespace kiwi::agent {

namespace {
constexpr std::int64_t kRollupMs = Store::kRollupMs;
constexpr std::int64_t kHourMs = Store::kHourMs;
constexpr std::int64_t kDayMs = Store::kDayMs;
constexpr std::uint32_t kGroupSeries = Store::kGroupSeries;
constexpr std::size_t kNarrowSeries = Store::kNarrowSeries;

// Accumulates one series over buckets (one bucket per row when not downsampling).
struct Column {
  std::size_t series_index;      // into the catalog
  std::vector<double> value;     // sum (mean), or the running min/max/last
  std::vector<std::uint32_t> n;  // values seen in the bucket
  // With a band: the lowest and highest sample seen in the bucket (low > high: none yet).
  std::vector<double> low, high;
};

// `v` stands for `weight` samples (a minute rollup's mean, min, max or last, or one sample); a sum
// of `count` samples is v with weight 1 and count n.
void accumulate(Column& c, std::size_t bucket, double v, Aggregate agg, std::uint32_t weight = 1,
                std::uint32_t count = 0) {
  if (c.value.size() <= bucket) {
    c.value.resize(bucket + 1, 0);
    c.n.resize(bucket + 1, 0);
  }
  double& acc = c.value[bucket];
  std::uint32_t& n = c.n[bucket];
  if (agg == Aggregate::mean)
    acc = (n ? acc : 0) + v * weight;
  else if (n == 0 || agg == Aggregate::last)
    acc = v;
  else if (agg == Aggregate::max)
    acc = std::max(acc, v);
  else
    acc = std::min(acc, v);
  n += count ? count : weight;
}

// With a band: the bucket's range widened to [low, high] (one sample: low = high = it; a rollup:
// its own min and max, whatever the aggregate). A NaN widens nothing.
void widen(Column& c, std::size_t bucket, double low, double high) {
  if (c.low.size() <= bucket) {
    c.low.resize(bucket + 1, HUGE_VAL);
    c.high.resize(bucket + 1, -HUGE_VAL);
  }
  c.low[bucket] = std::min(c.low[bucket], low);
  c.high[bucket] = std::max(c.high[bucket], high);
}

// wanted[id]: whether the series of that id (1..catalog.size()) matches a pattern of the query
// (its name or its key; every series without patterns).
std::vector<char> select_series(const SeriesCatalog& catalog, const HistoryQuery& q) {
  std::vector<char> wanted(catalog.size() + 1, 0);
  for (std::size_t id = 1; id <= catalog.size(); ++id) {
    auto& s = catalog[id - 1];
    bool ok = q.patterns.empty();
    for (auto& p : q.patterns) ok = ok || kiwi::glob_match(p, s.name) || kiwi::glob_match(p, s.key);
    wanted[id] = ok;
  }
  return wanted;
}

// Output points, oldest first: each bucket's start (a multiple of the step; without a step, the
// sample's time) and the time it is labelled with. With a step, a bucket whose data runs in from
// the bucket before it is labelled with its start, so evenly filled buckets are evenly spaced; a
// bucket whose data begins inside it (the first in the window, the first after a gap: the
// agent's first sample, a restart) is labelled with the time of its first sample. No point
// claims a time before the data it summarises, nor before `since`. Rows arrive oldest first.
// A minute's rollup goes into the bucket its first sample falls in (with a step that is not a
// whole number of minutes a minute can straddle two buckets), so every label lies within its
// bucket, and the labels strictly increase whatever the step.
class Buckets {
 public:
  Buckets(const HistoryQuery& q, std::int64_t step_ms, const SeriesCatalog& catalog)
      : aggregate_(q.aggregate),
        band_(q.band),
        step_ms_(step_ms),
        wanted_(select_series(catalog, q)),
        column_of_(catalog.size() + 1, -1) {}

  const std::vector<char>& wanted() const { return wanted_; }
  std::int64_t last_row_ts() const { return last_row_ts_; }  // of the last add_row()

  // The bucket starting at `b` (the last one, or a new one after it) for data from `first_ts`.
  std::size_t bucket_of(std::int64_t b, std::int64_t first_ts) {
    if (start_.empty() || start_.back() != b) {
      const bool continued = step_ms_ && !start_.empty() && start_.back() == b - step_ms_;
      start_.push_back(b);
      label_.push_back(continued ? b : std::max(b, first_ts));
    }
    return start_.size() - 1;
  }

  // One tick (a sample_codec blob).
  void add_row(std::int64_t ts, std::string_view blob) {
    last_row_ts_ = ts;
    const std::size_t bucket = bucket_of(step_ms_ ? floor_to(ts, step_ms_) : ts, ts);
    sample_codec::decode(blob, [&](std::uint32_t id, double v) {
      if (id == 0 || id >= wanted_.size() || !wanted_[id]) return;
      Column& c = column(id);
      accumulate(c, bucket, v, aggregate_);
      if (band_) widen(c, bucket, v, v);
    });
  }

  // One series' minute or hour (mean, min, max, last; count) into `bucket`. `sum`: parts[0] is
  // the sum of the values, not their mean (an hour summary: exact, as the minutes add up).
  void add_parts(std::size_t bucket, std::uint32_t id, const double* parts, double count,
                 bool sum = false) {
    const double chosen = parts[aggregate_ == Aggregate::mean  ? 0
                                : aggregate_ == Aggregate::min ? 1
                                : aggregate_ == Aggregate::max ? 2
                                                               : 3];
    const auto n = static_cast<std::uint32_t>(count);
    Column& c = column(id);
    if (sum && aggregate_ == Aggregate::mean)
      accumulate(c, bucket, chosen, aggregate_, 1, n);
    else
      accumulate(c, bucket, chosen, aggregate_, n);
    if (band_) widen(c, bucket, parts[1], parts[2]);
  }

  // A minute row (unpacked) whose first sample is at `first_ts`: the five values of each series
  // arrive together (keys id * 5 + k, sorted); key 0 (id 0) is the first sample's offset.
  void add_rollup(std::int64_t first_ts, std::string_view blob) {
    const std::size_t bucket = bucket_of(floor_to(first_ts, step_ms_), first_ts);
    for_each_summary(blob, [&](std::uint32_t id, const double* parts, double count) {
      if (id != 0 && id < wanted_.size() && wanted_[id]) add_parts(bucket, id, parts, count);
    });
  }

  // The latest `limit` points, a column per series with data in them, in series id order.
  HistoryResult result(std::size_t limit, const SeriesCatalog& catalog);

 private:
  Column& column(std::uint32_t id) {
    if (column_of_[id] < 0) {
      column_of_[id] = static_cast<int>(columns_.size());
      columns_.push_back({id - 1, {}, {}, {}, {}});
    }
    return columns_[static_cast<std::size_t>(column_of_[id])];
  }

  const Aggregate aggregate_;
  const bool band_;
  const std::int64_t step_ms_;
  const std::vector<char> wanted_;   // by series id
  std::vector<std::int64_t> start_;  // ms
  std::vector<std::int64_t> label_;  // ms
  std::vector<int> column_of_;       // by series id: index into columns_, or -1
  std::vector<Column> columns_;
  std::int64_t last_row_ts_ = INT64_MIN;
};

HistoryResult Buckets::result(std::size_t limit, const SeriesCatalog& catalog) {
  const std::size_t points = start_.size();
  const std::size_t skip = points > limit ? points - limit : 0;
  HistoryResult out;
  out.timestamps.reserve(points - skip);
  for (std::size_t i = skip; i < points; ++i)
    out.timestamps.push_back(static_cast<double>(label_[i]) / 1000.0);
  // Stable output order: by series id (the order the agent first saw them).
  std::sort(columns_.begin(), columns_.end(),
            [](const Column& a, const Column& b) { return a.series_index < b.series_index; });
  for (auto& c : columns_) {
    c.value.resize(points, 0);
    c.n.resize(points, 0);
    std::vector<double> values, low, high;
    values.reserve(points - skip);
    bool any = false;
    for (std::size_t i = skip; i < points; ++i) {
      double v = c.n[i] == 0                     ? std::nan("")
                 : aggregate_ == Aggregate::mean ? c.value[i] / c.n[i]
                                                 : c.value[i];
      any |= c.n[i] != 0;
      values.push_back(v);
    }
    if (!any) continue;  // only in points that `limit` cut off
    if (band_) {
      c.low.resize(points, HUGE_VAL);
      c.high.resize(points, -HUGE_VAL);
      low.reserve(points - skip);
      high.reserve(points - skip);
      for (std::size_t i = skip; i < points; ++i) {
        const bool none = std::isnan(values[i - skip]) || c.low[i] > c.high[i];
        low.push_back(none ? std::nan("") : c.low[i]);
        high.push_back(none ? std::nan("") : c.high[i]);
      }
    }
    auto& s = catalog[c.series_index];
    out.series.push_back({s.key, s.name, s.labels, s.unit, s.kind, std::move(values),
                          std::move(low), std::move(high)});
  }
  return out;
}

// The rows of one folded unit (schema.hpp) for the wanted series: an hour's (its minute map and
// a row per series of 60 minutes) or a day's (its hour map and a row per series of 24 hours).
struct Folded {
  Folded(std::int64_t unit_ms, std::int64_t part_ms) : unit(unit_ms), part(part_ms) {}
  const std::int64_t unit, part;  // ms: the unit, and each of its parts (minute or hour)
  std::int64_t start = INT64_MIN;
  bool folded = false;                                        // the unit has rows
  std::vector<std::pair<std::uint32_t, std::int64_t>> parts;  // part, first-sample offset
  std::vector<std::pair<std::uint32_t, std::string>> rows;    // series id, its row (unpacked)
};

// The tiers, finest first: what a span of time that a tier does not cover is filled from.
enum class Tier { raw, minutes, hours };

// One window [since_ms, until_ms] at step_ms (0: the latest `limit` samples), as run_query() says.
// Without a step: the latest `limit` rows, read newest first and kept in that order until the
// end. With a step: every row of the window, oldest first, folded into buckets as it streams.
// Each span of time is read from one tier: the coarsest the step allows (hour summaries for a
// step of whole hours or a day and more, minute summaries for a step of a minute or more, raw
// ticks otherwise), and a coarser one where a finer tier no longer reaches (pruned by its
// retention); a finer one where the coarse one has no summary (the hour or day in progress, one
// not folded). A summary is read when all of its samples lie in the window, and its span from the
// finer tiers otherwise: a minute or hour begun before `since`, one whose summary was lost (kill
// -9), and the minute being summarised now, whose stored rollup (if the agent restarted inside
// it) is only part of it. `raw_from_` is where the next span starts: every tier reads on from it,
// so no time is read twice.
class Window {
 public:
  Window(const QuerySources& src, const HistoryQuery& q, std::int64_t since_ms,
         std::int64_t until_ms, std::int64_t step_ms)
      : src_(src),
        q_(q),
        since_ms_(since_ms),
        until_ms_(until_ms),
        step_ms_(step_ms),
        catalog_(src.series.view()),
        board_(src.board.view()),  // before the file is read (minute_board.hpp)
        buckets_(q, step_ms, *catalog_) {}

  HistoryResult run();

 private:
  void read_latest();
  void read_tiers();
  void read_days(std::int64_t hi);
  void read_minutes(std::int64_t hi);
  void read_minutes_unfolded(std::int64_t lo, std::int64_t hi_key);
  bool read_minutes_in_memory(std::int64_t hour, std::int64_t lo, std::int64_t hi_key);
  bool take_minute_row(std::int64_t key, std::string_view blob);
  bool read_folded(Folded& f, FoldedStatements& st, std::int64_t start);
  void take_folded(const Folded& f, Tier tier, std::int64_t cursor, std::int64_t hi);
  bool take_span(std::int64_t start, std::int64_t length, std::int64_t first_ts, Tier finer);
  void scan(std::int64_t from, std::int64_t to);
  // Calls fn(unpacked data) for the row at `key` of `st`, if there is one that unpacks.
  template <class Fn>
  void row_at(sql::Statement& st, std::int64_t key, Fn&& fn) {
    auto rows = st.query(key);
    if (rows.next())
      if (auto blob = sample_codec::unpack(rows.blob(0), buf_)) fn(*blob);
    if (rows.failed()) throw conn_->db().error("cannot read history");
  }
  // The first ts of `st` (a `next` statement) in [lo, hi], INT64_MAX if none.
  std::int64_t next_at(sql::Statement& st, std::int64_t lo, std::int64_t hi);
  void merge_queued();

  const QuerySources& src_;
  const HistoryQuery& q_;
  const std::int64_t since_ms_, until_ms_, step_ms_;
  const SeriesTable::View catalog_;
  const MinuteBoard::View board_;  // the minutes not in the file yet
  Buckets buckets_;
  std::vector<std::uint32_t> ids_;  // the wanted series
  bool by_key_ = true;  // folded units' rows of ids_ read by key, not as the unit's range
  std::int64_t taken_minute_ = INT64_MIN, taken_first_ = 0;  // of take_minute_row()
  // A connection of the pool while the window is read. An error drops it with the exception.
  std::unique_ptr<ReadConnection> conn_;
  std::string buf_;                                                 // rows unpacked by row_at()
  std::vector<std::pair<std::int64_t, std::string>> newest_first_;  // without a step
  std::int64_t raw_from_ = INT64_MIN;       // time from here on is not read yet
  std::int64_t covered_until_ = INT64_MIN;  // rows before this are in the summaries already read
};

HistoryResult Window::run() {
  const std::vector<char>& wanted = buckets_.wanted();
  for (std::uint32_t id = 1; id < wanted.size(); ++id)
    if (wanted[id]) ids_.push_back(id);
  // No series wanted (each pattern a glob that matches nothing here): nothing to read. With a
  // step, the tiers' reading would otherwise still decode every raw tick of the range (a day's
  // for a long range: 230 ms on a year-sized file, kiwi-bench-year) to answer no series.
  if (ids_.empty()) return buckets_.result(q_.limit, *catalog_);
  conn_ = src_.pool.borrow();
  // One read transaction: every tier is read from the same commit (a fold committed between two
  // of its statements could not show an hour twice or not at all), and the statements do not
  // each take and check the file's snapshot again (a window of a year runs thousands).
  conn_->db().exec("BEGIN");
  if (!step_ms_) {
    read_latest();
  } else {
    raw_from_ = since_ms_;
    read_tiers();
    scan(raw_from_, until_ms_);
  }
  conn_->db().exec("COMMIT");
  src_.pool.give_back(std::move(conn_));
  merge_queued();
  return buckets_.result(q_.limit, *catalog_);
}

void Window::read_latest() {
  scan_ticks(conn_->db(), conn_->ticks(), since_ms_, until_ms_, true,
             [&](std::int64_t ts, std::string_view blob) {
               newest_first_.emplace_back(ts, std::string(blob));
               return newest_first_.size() < q_.limit;
             });
}

// Ticks in [from, to], oldest first, into the buckets.
void Window::scan(std::int64_t from, std::int64_t to) {
  scan_ticks(conn_->db(), conn_->ticks(), from, to, false,
             [&](std::int64_t ts, std::string_view blob) {
               buckets_.add_row(ts, blob);
               return true;
             });
}

std::int64_t Window::next_at(sql::Statement& st, std::int64_t lo, std::int64_t hi) {
  if (hi < lo) return INT64_MAX;
  auto rows = st.query(lo, hi);
  if (rows.next()) return rows.int64(0);
  if (rows.failed()) throw conn_->db().error("cannot read history");
  return INT64_MAX;
}

// Where each tier starts (its oldest row), then the spans each one reads (the class comment).
void Window::read_tiers() {
  // A lookup costs about three rows of a range (kiwi-bench-year: the dashboard's 33 of 196
  // series over a year, 32 ms by key against 62 ms by range).
  by_key_ = ids_.size() <= kNarrowSeries || ids_.size() * 3 <= catalog_->size();
  std::int64_t raw_start = INT64_MAX, minute_start = INT64_MAX;
  {
    auto rows = conn_->bounds().query();
    if (!rows.next()) throw conn_->db().error("cannot read history");
    for (int c : {0, 1})
      if (!rows.null(c)) raw_start = std::min(raw_start, rows.int64(c));
    raw_start = std::min(raw_start, conn_->ticks().log->oldest());
    if (!rows.null(2)) minute_start = std::min(minute_start, floor_to(rows.int64(2), kRollupMs));
    src_.queue.for_each(
        [&](std::int64_t ts, const std::string&) { raw_start = std::min(raw_start, ts); });
    if (!rows.null(3)) minute_start = std::min(minute_start, floor_to(rows.int64(3), kHourMs));
  }
  const bool hour_steps = step_ms_ >= kHourMs && (step_ms_ % kHourMs == 0 || step_ms_ >= kDayMs);
  read_days(hour_steps ? until_ms_ : std::min(until_ms_, minus_saturating(minute_start, 1)));
  const std::int64_t open = src_.open_minute.load(std::memory_order_acquire);
  const std::int64_t hi = open == INT64_MAX ? until_ms_ : std::min(until_ms_, open - 1);
  // With a finer step, only minutes that end before the ticks begin (the rest is read raw).
  read_minutes(step_ms_ >= kRollupMs ? hi : std::min(hi, minus_saturating(raw_start, kRollupMs)));
}

// A span [start, start + length) summarised in one row, first sample at first_ts: false if it is
// read from the finer tiers instead (it has samples before the window). The time before it not
// read yet is read from the finer tiers first.
bool Window::take_span(std::int64_t start, std::int64_t length, std::int64_t first_ts, Tier finer) {
  if (first_ts < since_ms_) return false;
  if (start > raw_from_) {
    if (finer == Tier::minutes) read_minutes(start - 1);
    if (start > raw_from_) scan(raw_from_, start - 1);
  }
  raw_from_ = covered_until_ = start + length;
  return true;
}

// Unpacked rows of the unit at `start`: its map, and the wanted series' rows (by key when few,
// else one range). False when the unit has no map row (not folded).
bool Window::read_folded(Folded& f, FoldedStatements& st, std::int64_t start) {
  if (f.start == start) return f.folded;
  f.start = start;
  f.folded = false;
  f.parts.clear();
  f.rows.clear();
  row_at(st.at, start, [&](std::string_view blob) {
    sample_codec::decode(blob, [&](std::uint32_t p, double v) {
      f.parts.emplace_back(p, static_cast<std::int64_t>(v));
    });
    f.folded = true;
  });
  if (!f.folded) return false;
  if (by_key_) {
    for (auto id : ids_)
      row_at(st.at, start + id,
             [&](std::string_view blob) { f.rows.emplace_back(id, std::string(blob)); });
    return true;
  }
  const std::vector<char>& wanted = buckets_.wanted();
  auto rows = st.range.query(start + 1, start + f.unit - 1);
  std::string buf;
  while (rows.next()) {
    const auto id = static_cast<std::uint64_t>(rows.int64(0) - start);
    if (id >= wanted.size() || !wanted[id]) continue;
    if (auto blob = sample_codec::unpack(rows.blob(1), buf))
      f.rows.emplace_back(static_cast<std::uint32_t>(id), std::string(*blob));
  }
  if (rows.failed()) throw conn_->db().error("cannot read history");
  return true;
}

// The parts of a folded unit from `cursor` to `hi` (each part's start), from its rows.
void Window::take_folded(const Folded& f, Tier finer, std::int64_t cursor, std::int64_t hi) {
  const auto count = static_cast<std::size_t>(f.unit / f.part);
  const bool sums = f.unit == kDayMs;  // day rows hold each hour's sum (schema.hpp)
  std::vector<std::ptrdiff_t> bucket(count, -1);
  for (auto& [p, offset] : f.parts) {
    const std::int64_t at = f.start + static_cast<std::int64_t>(p) * f.part;
    if (p >= count || at < cursor || at > hi) continue;
    const std::int64_t first_ts = at + offset;
    if (!take_span(at, f.part, first_ts, finer)) continue;
    bucket[p] =
        static_cast<std::ptrdiff_t>(buckets_.bucket_of(floor_to(first_ts, step_ms_), first_ts));
  }
  for (auto& row : f.rows) {
    const std::uint32_t id = row.first;  // a lambda may not capture a structured binding (clang 14)
    try {
      for_each_summary(row.second, [&](std::uint32_t p, const double* parts, double n) {
        if (p < count && bucket[p] >= 0)
          buckets_.add_parts(static_cast<std::size_t>(bucket[p]), id, parts, n, sums);
      });
    } catch (const StoreError&) {
      // a row that does not decode: that series is missing from the unit
    }
  }
}

// A minute's row of group key - minute (unpacked), if its minute is read from it: group 0 first
// (the minute's first-sample offset; a minute without it is not a rollup), then the others.
bool Window::take_minute_row(std::int64_t key, std::string_view blob) {
  const std::int64_t minute = floor_to(key, kRollupMs);
  if (key == minute) {
    const std::int64_t first_ts = minute + first_sample_offset(blob);
    if (!take_span(minute, kRollupMs, first_ts, Tier::raw)) return false;
    taken_minute_ = minute, taken_first_ = first_ts;
  } else if (minute != taken_minute_) {
    return false;
  }
  buckets_.add_rollup(taken_first_, blob);
  return true;
}

// The minutes of `hour` in [lo, hi_key] from the writer's memory, if it has that hour.
bool Window::read_minutes_in_memory(std::int64_t hour, std::int64_t lo, std::int64_t hi_key) {
  auto it = std::lower_bound(board_->begin(), board_->end(), hour,
                             [](const MinuteRows& m, std::int64_t t) { return m.minute < t; });
  if (it == board_->end() || it->minute >= hour + kHourMs) return false;
  std::string buf;
  for (; it != board_->end() && it->minute <= hi_key && it->minute < hour + kHourMs; ++it) {
    if (it->minute < lo || it->groups.empty()) continue;
    for (std::size_t g = 0; g < it->groups.size(); ++g) {
      if (it->groups[g].empty()) continue;
      auto blob = sample_codec::unpack(it->groups[g], buf);
      if (!blob || !take_minute_row(it->minute + static_cast<std::int64_t>(g), *blob)) break;
    }
  }
  return true;
}

// Hours (their summaries in day rows) that start at raw_from_ or later and end by `hi`.
void Window::read_days(std::int64_t hi) {
  hi = minus_saturating(hi, kHourMs - 1);  // the last hour starting here ends by hi
  Folded day(kDayMs, kHourMs);
  for (std::int64_t cursor = raw_from_; cursor <= hi;) {
    const std::int64_t next = next_at(conn_->days().next, floor_to(cursor, kDayMs), hi);
    if (next == INT64_MAX) break;
    const std::int64_t d = floor_to(next, kDayMs);
    if (read_folded(day, conn_->days(), d)) take_folded(day, Tier::minutes, cursor, hi);
    if (d > INT64_MAX - kDayMs) break;
    cursor = std::max(cursor, d + kDayMs);
  }
}

// Minutes starting from raw_from_ (less up to a minute: one begun before `since` whose first
// sample is in the window) to `hi`: of a folded hour from its hour rows, of another from its
// minute rows.
void Window::read_minutes(std::int64_t hi) {
  const std::int64_t lo = minus_saturating(raw_from_, kRollupMs - 1);
  const std::int64_t hi_key = hi > INT64_MAX - kRollupMs ? INT64_MAX
                              : hi < INT64_MIN + kRollupMs
                                  ? hi
                                  : floor_to(hi, kRollupMs) + kRollupMs - 1;
  Folded hour(kHourMs, kRollupMs);
  for (std::int64_t cursor = lo; cursor <= hi;) {
    auto in_memory =
        std::lower_bound(board_->begin(), board_->end(), cursor,
                         [](const MinuteRows& m, std::int64_t t) { return m.minute < t; });
    const std::int64_t h =
        floor_to(std::min({next_at(conn_->hours().next, floor_to(cursor, kHourMs), hi_key),
                           next_at(conn_->rollup_next(), cursor, hi_key),
                           in_memory == board_->end() ? INT64_MAX : in_memory->minute}),
                 kHourMs);
    if (h > hi) break;  // none (INT64_MAX floors to a later hour than any hi)
    const std::int64_t from = std::max(cursor, h);
    const std::int64_t to = std::min(hi_key, h + kHourMs - 1);
    if (read_minutes_in_memory(h, from, to)) {
    } else if (read_folded(hour, conn_->hours(), h)) {
      take_folded(hour, Tier::raw, from, hi);
    } else {
      read_minutes_unfolded(from, to);
    }
    if (h > INT64_MAX - kHourMs) break;
    cursor = h + kHourMs;
  }
}

// Minutes with keys in [lo, hi_key] of an hour without hour rows, from their minute rows: group 0
// (the minute's first-sample offset; a minute without it is not a rollup) and the groups of the
// wanted series, by key when few, else every row.
void Window::read_minutes_unfolded(std::int64_t lo, std::int64_t hi_key) {
  auto take = [&](std::int64_t key, std::string_view blob) {
    return floor_to(key, kRollupMs) >= lo && take_minute_row(key, blob);
  };
  if (ids_.size() > kNarrowSeries) {
    auto rows = conn_->rollups().query(lo, hi_key);
    std::string buf;
    while (rows.next())
      if (auto blob = sample_codec::unpack(rows.blob(1), buf))  // a damaged row reads as missing
        take(rows.int64(0), *blob);
    if (rows.failed()) throw conn_->db().error("cannot read history");
    return;
  }
  std::vector<std::uint32_t> groups;
  for (auto id : ids_)
    if (id / kGroupSeries && (groups.empty() || groups.back() != id / kGroupSeries))
      groups.push_back(id / kGroupSeries);
  for (std::int64_t cursor = lo; cursor <= hi_key;) {
    std::int64_t key;
    std::string row;  // group 0 of this minute, unpacked
    bool have_row = false;
    {
      auto rows = conn_->rollup_next().query(cursor, hi_key);
      if (!rows.next()) {
        if (rows.failed()) throw conn_->db().error("cannot read history");
        break;
      }
      key = rows.int64(0);
      if (auto blob = sample_codec::unpack(rows.blob(1), buf_)) row.assign(*blob), have_row = true;
    }
    const std::int64_t minute = floor_to(key, kRollupMs);
    if (minute > INT64_MAX - kRollupMs) break;
    cursor = minute + kRollupMs;
    if (key != minute || !have_row || !take(key, row)) continue;
    for (auto g : groups)
      row_at(conn_->rollup_at(), minute + g,
             [&](std::string_view blob) { take(minute + g, blob); });
  }
}

// Rows not yet committed are the newest; merge those in the window. A row may be both committed
// and still queued while a flush finishes: keep one copy.
void Window::merge_queued() {
  std::vector<std::pair<std::int64_t, std::string>> pending;
  src_.queue.for_each([&](std::int64_t ts, const std::string& blob) {
    if (ts >= since_ms_ && ts <= until_ms_) pending.emplace_back(ts, blob);
  });
  std::int64_t committed_max = INT64_MIN;
  if (step_ms_) {
    const std::int64_t last_row_ts = buckets_.last_row_ts();
    committed_max =
        covered_until_ == INT64_MIN ? last_row_ts : std::max(last_row_ts, covered_until_ - 1);
    for (auto& [ts, blob] : pending)
      if (ts > committed_max) buckets_.add_row(ts, blob);
  } else {
    if (!newest_first_.empty()) committed_max = newest_first_.front().first;
    std::vector<std::pair<std::int64_t, std::string>> merged;
    for (auto it = pending.rbegin(); it != pending.rend(); ++it)
      if (it->first > committed_max) merged.push_back(std::move(*it));
    for (auto& row : newest_first_) merged.push_back(std::move(row));
    if (merged.size() > q_.limit) merged.resize(q_.limit);
    newest_first_ = std::move(merged);
    for (auto it = newest_first_.rbegin(); it != newest_first_.rend(); ++it)
      buckets_.add_row(it->first, it->second);
  }
}

}  // namespace

// Without a step: the latest `limit` samples in [since, until]. With a step: buckets aligned to
// multiples of it, and `limit` keeps the latest `limit` buckets that hold data (empty buckets are
// left out, so they do not count). A step without `since` has no window to read; it is found by
// widening one: first the `limit` buckets up to the newest sample, then twice as many, and so on,
// until the window holds `limit` buckets with data or reaches back to the oldest row. Every
// attempt starts on a bucket boundary, so no bucket is cut in two, and all attempts together read
// at most about twice the rows of the last one.
HistoryResult run_query(const QuerySources& src, const HistoryQuery& q) {
  // Seconds to milliseconds, rounded (down for until, up for since) and saturated at the range
  // of int64: a double outside it (1.7e17 s, from a handler that checks less than ours) cast to
  // int64 is undefined. NaN reads as the far past.
  auto to_ms = [](double ms) {
    if (!(ms > -9.2e18)) return INT64_MIN;
    if (!(ms < 9.2e18)) return INT64_MAX;
    return static_cast<std::int64_t>(ms);
  };
  const std::int64_t until_ms = q.until ? to_ms(std::floor(*q.until * 1000)) : INT64_MAX;
  // A step longer than any history (a thousand years) is one bucket either way; capped there so
  // that bucket arithmetic stays far from overflow.
  constexpr double kMaxStepMs = 1000 * 366 * 86'400'000.0;
  const std::int64_t step_ms =
      q.step > 0 ? std::max<std::int64_t>(1, to_ms(std::round(std::min(q.step * 1000, kMaxStepMs))))
                 : 0;
  if (!step_ms || q.since) {
    const std::int64_t since_ms = q.since ? to_ms(std::ceil(*q.since * 1000)) : INT64_MIN;
    return Window(src, q, since_ms, until_ms, step_ms).run();
  }

  std::int64_t newest = INT64_MIN, oldest = INT64_MAX;
  src.queue.for_each([&](std::int64_t ts, const std::string&) {
    if (ts <= until_ms) newest = std::max(newest, ts), oldest = std::min(oldest, ts);
  });
  {
    auto conn = src.pool.borrow();
    scan_ticks(conn->db(), conn->ticks(), INT64_MIN, until_ms, true,
               [&](std::int64_t ts, std::string_view) {
                 newest = std::max(newest, ts);
                 return false;
               });  // an error drops the connection with the exception
    {
      auto rows = conn->bounds().query();
      if (!rows.next()) throw conn->db().error("cannot read history");  // conn dropped
      // Keys of summaries are their start + a group or series id.
      constexpr std::int64_t kUnit[] = {1, 1, kRollupMs, kHourMs, kDayMs};
      for (int c : {0, 1, 2, 3, 4})
        if (!rows.null(c)) oldest = std::min(oldest, floor_to(rows.int64(c), kUnit[c]));
      oldest = std::min(oldest, conn->ticks().log->oldest());
    }
    src.pool.give_back(std::move(conn));
  }
  if (newest == INT64_MIN) return {};
  const std::int64_t last = floor_to(newest, step_ms),
                     first = floor_to(std::min(oldest, newest), step_ms);
  for (double buckets = static_cast<double>(std::max<std::size_t>(1, q.limit));; buckets *= 2) {
    const double back = (buckets - 1) * static_cast<double>(step_ms);
    const std::int64_t from =
        back >= static_cast<double>(last - first) ? first : last - static_cast<std::int64_t>(back);
    HistoryResult r = Window(src, q, from, until_ms, step_ms).run();
    if (r.timestamps.size() >= q.limit || from <= first) return r;
  }
}

}  // namespace kiwi::agent
