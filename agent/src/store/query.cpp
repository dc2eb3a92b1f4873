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
constexpr std::uint32_t kGroupSeries = Store::kGroupSeries;
constexpr std::size_t kNarrowSeries = Store::kNarrowSeries;

// Accumulates one series over buckets (one bucket per row when not downsampling).
struct Column {
  std::size_t series_index;      // into the catalog
  std::vector<double> value;     // sum (mean), or the running min/max/last
  std::vector<std::uint32_t> n;  // values seen in the bucket
};

// `v` stands for `weight` samples (a minute rollup's mean, min, max or last, or one sample).
void accumulate(Column& c, std::size_t bucket, double v, Aggregate agg, std::uint32_t weight = 1) {
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
  n += weight;
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
      accumulate(column(id), bucket, v, aggregate_);
    });
  }

  // One series' minute (mean, min, max, last; count) into `bucket`.
  void add_parts(std::size_t bucket, std::uint32_t id, const double* parts, double count) {
    const double chosen = parts[aggregate_ == Aggregate::mean  ? 0
                                : aggregate_ == Aggregate::min ? 1
                                : aggregate_ == Aggregate::max ? 2
                                                               : 3];
    accumulate(column(id), bucket, chosen, aggregate_, static_cast<std::uint32_t>(count));
  }

  // A minute row (unpacked) whose first sample is at `first_ts`: the five values of each series
  // arrive together (keys id * 5 + k, sorted); key 0 (id 0) is the first sample's offset.
  void add_rollup(std::int64_t first_ts, std::string_view blob) {
    const std::size_t bucket = bucket_of(floor_to(first_ts, step_ms_), first_ts);
    double parts[4] = {};
    sample_codec::decode(blob, [&](std::uint32_t key, double v) {
      const std::uint32_t id = key / 5, k = key % 5;
      if (id == 0 || id >= wanted_.size() || !wanted_[id]) return;
      if (k < 4) return void(parts[k] = v);
      add_parts(bucket, id, parts, v);
    });
  }

  // The latest `limit` points, a column per series with data in them, in series id order.
  HistoryResult result(std::size_t limit, const SeriesCatalog& catalog);

 private:
  Column& column(std::uint32_t id) {
    if (column_of_[id] < 0) {
      column_of_[id] = static_cast<int>(columns_.size());
      columns_.push_back({id - 1, {}, {}});
    }
    return columns_[static_cast<std::size_t>(column_of_[id])];
  }

  const Aggregate aggregate_;
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
    std::vector<double> values;
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
    auto& s = catalog[c.series_index];
    out.series.push_back({s.key, s.name, s.labels, s.unit, s.kind, std::move(values)});
  }
  return out;
}

// The hour rows of one hour, for a few series: its minute map, and per series the five values of
// each minute it has.
struct HourRows {
  explicit HourRows(std::size_t series) : five(series * 300), has(series * 60) {}
  std::int64_t hour = INT64_MIN;
  bool folded = false;                                          // the hour has hour rows
  std::vector<std::pair<std::uint32_t, std::int64_t>> minutes;  // m, first-sample offset
  std::vector<double> five;                                     // [series * 300 + m * 5 + k]
  std::vector<char> has;                                        // [series * 60 + m]
};

// One window [since_ms, until_ms] at step_ms (0: the latest `limit` samples), as run_query() says.
// Without a step: the latest `limit` rows, read newest first and kept in that order until the
// end. With a step: every row of the window, oldest first, folded into buckets as it streams.
// With a step of a minute or more, a minute is read from its rollup when all of its samples lie
// in the window, and from its samples otherwise: a minute begun before `since`, a minute whose
// rollup was lost (kill -9), and the minute being summarised now, whose stored rollup (if the
// agent restarted inside it) is only part of it.
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
        buckets_(q, step_ms, *catalog_) {}

  HistoryResult run();

 private:
  void read_latest();
  void read_rollups();
  void read_minutes_wide(std::int64_t lo, std::int64_t hi_key);
  void read_minutes_narrow(const std::vector<std::uint32_t>& ids, std::int64_t lo, std::int64_t hi,
                           std::int64_t hi_key);
  void read_hour_rows(HourRows& h, std::int64_t hour, const std::vector<std::uint32_t>& ids);
  void take_hour(const HourRows& h, const std::vector<std::uint32_t>& ids, std::int64_t cursor,
                 std::int64_t hi);
  bool take_minute(std::int64_t minute, std::int64_t first_ts);
  void scan(std::int64_t from, std::int64_t to);
  // Calls fn(unpacked data) for the row at `key` of `st`, if there is one that unpacks.
  template <class Fn>
  void row_at(sql::Statement& st, std::int64_t key, Fn&& fn) {
    auto rows = st.query(key);
    if (rows.next())
      if (auto blob = sample_codec::unpack(rows.blob(0), buf_)) fn(*blob);
    if (rows.failed()) throw conn_->db().error("cannot read history");
  }
  void merge_queued();

  const QuerySources& src_;
  const HistoryQuery& q_;
  const std::int64_t since_ms_, until_ms_, step_ms_;
  const SeriesTable::View catalog_;
  Buckets buckets_;
  // A connection of the pool while the window is read. An error drops it with the exception.
  std::unique_ptr<ReadConnection> conn_;
  std::string buf_;                                                 // rows unpacked by row_at()
  std::vector<std::pair<std::int64_t, std::string>> newest_first_;  // without a step
  std::int64_t raw_from_ = INT64_MIN;       // samples from here on are not in a rollup read
  std::int64_t covered_until_ = INT64_MIN;  // rows before this are in the rollups already read
};

HistoryResult Window::run() {
  conn_ = src_.pool.borrow();
  if (!step_ms_) {
    read_latest();
  } else {
    raw_from_ = since_ms_;
    if (step_ms_ >= kRollupMs) read_rollups();
    scan(raw_from_, until_ms_);
  }
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

// A minute that has a rollup (its group 0 row), first sample at first_ts: false if it is read
// from its samples instead (it has samples before the window).
bool Window::take_minute(std::int64_t minute, std::int64_t first_ts) {
  if (first_ts < since_ms_) return false;
  if (minute > raw_from_) scan(raw_from_, minute - 1);
  raw_from_ = covered_until_ = minute + kRollupMs;
  return true;
}

void Window::read_rollups() {
  const std::int64_t open = src_.open_minute.load(std::memory_order_acquire);
  // Minutes starting in [lo, hi] are read from their rollup; their rows are keyed up to hi_key.
  const std::int64_t lo = minus_saturating(since_ms_, kRollupMs - 1);
  const std::int64_t hi = open == INT64_MAX ? until_ms_ : std::min(until_ms_, open - 1);
  const std::int64_t hi_key = hi > INT64_MAX - kRollupMs ? INT64_MAX
                              : hi < INT64_MIN + kRollupMs
                                  ? hi
                                  : floor_to(hi, kRollupMs) + kRollupMs - 1;
  const std::vector<char>& wanted = buckets_.wanted();
  std::vector<std::uint32_t> ids;  // wanted, if few
  for (std::uint32_t id = 1; id < wanted.size() && ids.size() <= kNarrowSeries; ++id)
    if (wanted[id]) ids.push_back(id);
  if (ids.size() > kNarrowSeries || hi < lo)
    read_minutes_wide(lo, hi_key);
  else
    read_minutes_narrow(ids, lo, hi, hi_key);
}

// Every row of every minute, group 0 first.
void Window::read_minutes_wide(std::int64_t lo, std::int64_t hi_key) {
  std::int64_t taken = INT64_MIN, taken_first = 0;
  auto rows = conn_->rollups().query(lo, hi_key);
  std::string buf;
  while (rows.next()) {
    auto blob = sample_codec::unpack(rows.blob(1), buf);
    if (!blob) continue;  // a damaged row reads as missing
    const std::int64_t key = rows.int64(0);
    const std::int64_t minute = floor_to(key, kRollupMs);
    if (minute < lo) continue;
    if (key == minute) {
      const std::int64_t first_ts = minute + first_sample_offset(*blob);
      if (!take_minute(minute, first_ts)) continue;
      taken = minute, taken_first = first_ts;
    } else if (minute != taken) {
      continue;  // a minute without a group 0 row is not a rollup
    }
    buckets_.add_rollup(taken_first, *blob);
  }
  if (rows.failed()) throw conn_->db().error("cannot read history");
}

// A few series: closed hours from their hour rows (the minute map, then a row per series), other
// minutes from group 0 and the groups of those series; each row by its key, so the cost does not
// grow with the series in the file.
void Window::read_minutes_narrow(const std::vector<std::uint32_t>& ids, std::int64_t lo,
                                 std::int64_t hi, std::int64_t hi_key) {
  std::vector<std::uint32_t> groups;
  for (auto id : ids)
    if (id / kGroupSeries && (groups.empty() || groups.back() != id / kGroupSeries))
      groups.push_back(id / kGroupSeries);
  HourRows hour_rows(ids.size());
  for (std::int64_t cursor = lo; cursor <= hi;) {
    std::int64_t minute;
    std::string row;  // group 0 of this minute, unpacked
    bool have_row = false;
    {
      auto rows = conn_->rollup_next().query(cursor, hi_key);
      if (!rows.next()) {
        if (rows.failed()) throw conn_->db().error("cannot read history");
        break;
      }
      const std::int64_t key = rows.int64(0);
      minute = floor_to(key, kRollupMs);
      if (key == minute && minute >= lo)
        if (auto blob = sample_codec::unpack(rows.blob(1), buf_))
          row.assign(*blob), have_row = true;
    }
    if (minute < lo) {
      cursor = minute + kRollupMs;
      continue;
    }
    const std::int64_t hour = floor_to(minute, kHourMs);
    if (hour != hour_rows.hour) read_hour_rows(hour_rows, hour, ids);
    if (hour_rows.folded) {
      take_hour(hour_rows, ids, cursor, hi);
      if (hour > INT64_MAX - kHourMs) break;
      cursor = hour + kHourMs;
      continue;
    }
    cursor = minute + kRollupMs;
    if (!have_row) continue;  // no group 0 row: not a rollup
    const std::int64_t first_ts = minute + first_sample_offset(row);
    if (!take_minute(minute, first_ts)) continue;
    buckets_.add_rollup(first_ts, row);
    for (auto g : groups)
      row_at(conn_->rollup_at(), minute + g,
             [&](std::string_view blob) { buckets_.add_rollup(first_ts, blob); });
  }
}

void Window::read_hour_rows(HourRows& h, std::int64_t hour, const std::vector<std::uint32_t>& ids) {
  h.hour = hour;
  h.folded = false;
  h.minutes.clear();
  row_at(conn_->hour_at(), hour, [&](std::string_view blob) {
    sample_codec::decode(blob, [&](std::uint32_t m, double v) {
      h.minutes.emplace_back(m, static_cast<std::int64_t>(v));
    });
    h.folded = true;
  });
  if (!h.folded) return;
  std::fill(h.has.begin(), h.has.end(), 0);
  for (std::size_t i = 0; i < ids.size(); ++i)
    row_at(conn_->hour_at(), hour + ids[i], [&](std::string_view blob) {
      sample_codec::decode(blob, [&](std::uint32_t key5, double v) {
        if (key5 >= 300) return;
        h.five[i * 300 + key5] = v;
        if (key5 % 5 == 4) h.has[i * 60 + key5 / 5] = 1;
      });
    });
}

// The minutes of a folded hour from `cursor` to `hi`, from its hour rows.
void Window::take_hour(const HourRows& h, const std::vector<std::uint32_t>& ids,
                       std::int64_t cursor, std::int64_t hi) {
  for (auto& [m, offset] : h.minutes) {
    const std::int64_t at = h.hour + static_cast<std::int64_t>(m) * kRollupMs;
    if (m >= 60 || at < cursor || at > hi) continue;
    const std::int64_t first_ts = at + offset;
    if (!take_minute(at, first_ts)) continue;
    const std::size_t bucket = buckets_.bucket_of(floor_to(first_ts, step_ms_), first_ts);
    for (std::size_t i = 0; i < ids.size(); ++i)
      if (h.has[i * 60 + m])
        buckets_.add_parts(bucket, ids[i], &h.five[i * 300 + m * 5], h.five[i * 300 + m * 5 + 4]);
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
      for (int c : {0, 1, 2})
        if (!rows.null(c)) {
          const std::int64_t v = rows.int64(c);  // a rollup key is minute + group
          oldest = std::min<std::int64_t>(oldest, c == 2 ? floor_to(v, kRollupMs) : v);
        }
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
