// The query side: Store::query() (the window and buckets it asks for), read from the blocks, the
// minute and hour rows, and the queue, through a connection of the read pool.
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

// The window [since_ms, until_ms] at step_ms (0: the latest `limit` samples), as query() says.
HistoryResult query_window(const QuerySources& src, const HistoryQuery& q, std::int64_t since_ms,
                           std::int64_t until_ms, std::int64_t step_ms);
}  // namespace

namespace {

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
    return query_window(src, q, since_ms, until_ms, step_ms);
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
    HistoryResult r = query_window(src, q, from, until_ms, step_ms);
    if (r.timestamps.size() >= q.limit || from <= first) return r;
  }
}

namespace {
HistoryResult query_window(const QuerySources& src, const HistoryQuery& q, std::int64_t since_ms,
                           std::int64_t until_ms, std::int64_t step_ms) {
  const SeriesTable::View catalog_ref = src.series.view();
  const SeriesCatalog& catalog = *catalog_ref;
  std::vector<char> wanted(catalog.size() + 1, 0);
  for (std::size_t id = 1; id <= catalog.size(); ++id) {
    auto& s = catalog[id - 1];
    bool ok = q.patterns.empty();
    for (auto& p : q.patterns) ok = ok || kiwi::glob_match(p, s.name) || kiwi::glob_match(p, s.key);
    wanted[id] = ok;
  }

  // Output points, oldest first: each bucket's start (a multiple of the step; without a step, the
  // sample's time) and the time it is labelled with. With a step, a bucket whose data runs in from
  // the bucket before it is labelled with its start, so evenly filled buckets are evenly spaced; a
  // bucket whose data begins inside it (the first in the window, the first after a gap: the
  // agent's first sample, a restart) is labelled with the time of its first sample. No point
  // claims a time before the data it summarises, nor before `since`.
  std::vector<std::int64_t> bucket_start, bucket_label;  // ms
  auto bucket_of = [&](std::int64_t b, std::int64_t first_ts) {
    if (bucket_start.empty() || bucket_start.back() != b) {
      const bool continued = step_ms && !bucket_start.empty() && bucket_start.back() == b - step_ms;
      bucket_start.push_back(b);
      bucket_label.push_back(continued ? b : std::max(b, first_ts));
    }
    return bucket_start.size() - 1;
  };
  std::vector<int> column_of(catalog.size() + 1, -1);
  std::vector<Column> columns;
  std::int64_t last_row_ts = INT64_MIN;
  auto add_row = [&](std::int64_t ts, std::string_view blob) {
    last_row_ts = ts;
    const std::size_t bucket = bucket_of(step_ms ? floor_to(ts, step_ms) : ts, ts);
    sample_codec::decode(blob, [&](std::uint32_t id, double v) {
      if (id == 0 || id >= wanted.size() || !wanted[id]) return;
      if (column_of[id] < 0) {
        column_of[id] = static_cast<int>(columns.size());
        columns.push_back({id - 1, {}, {}});
      }
      accumulate(columns[static_cast<std::size_t>(column_of[id])], bucket, v, q.aggregate);
    });
  };

  // A rollup row whose first sample is at `first_ts`: the five values of each series arrive
  // together (keys id * 5 + k, sorted); key 0 (id 0) is the first sample's offset.
  // One series' minute (mean, min, max, last; count) into `bucket`.
  auto add_parts = [&](std::size_t bucket, std::uint32_t id, const double* parts, double count) {
    if (column_of[id] < 0) {
      column_of[id] = static_cast<int>(columns.size());
      columns.push_back({id - 1, {}, {}});
    }
    const double chosen = parts[q.aggregate == Aggregate::mean  ? 0
                                : q.aggregate == Aggregate::min ? 1
                                : q.aggregate == Aggregate::max ? 2
                                                                : 3];
    accumulate(columns[static_cast<std::size_t>(column_of[id])], bucket, chosen, q.aggregate,
               static_cast<std::uint32_t>(count));
  };
  auto add_rollup = [&](std::int64_t ts, std::int64_t first_ts, std::string_view blob) {
    const std::size_t bucket = bucket_of(floor_to(ts, step_ms), first_ts);
    double parts[4] = {};
    sample_codec::decode(blob, [&](std::uint32_t key, double v) {
      const std::uint32_t id = key / 5, k = key % 5;
      if (id == 0 || id >= wanted.size() || !wanted[id]) return;
      if (k < 4) return void(parts[k] = v);
      add_parts(bucket, id, parts, v);
    });
  };

  // Ticks in [from, to], oldest first; the rollups of minutes starting in [from, to], unpacked.
  // An error drops the connection with the exception.
  auto conn = src.pool.borrow();
  auto scan = [&](std::int64_t from, std::int64_t to, auto&& on_tick) {
    scan_ticks(conn->db(), conn->ticks(), from, to, false,
               [&](std::int64_t ts, std::string_view blob) {
                 on_tick(ts, blob);
                 return true;
               });
  };
  auto scan_rollups = [&](std::int64_t from, std::int64_t to, auto&& on_row) {
    auto rows = conn->rollups().query(from, to);
    std::string buf;
    while (rows.next())
      if (auto blob = sample_codec::unpack(rows.blob(1), buf))
        on_row(rows.int64(0), *blob);  // a damaged row reads as missing
    if (rows.failed()) throw conn->db().error("cannot read history");
  };
  // Without a step: the latest `limit` rows, read newest first and kept in that order until the
  // end. With a step: every row of the window, oldest first, folded into buckets as it streams.
  // With a step of a minute or more, a minute is read from its rollup when all of its samples lie
  // in the window, and from its samples otherwise: a minute begun before `since`, a minute whose
  // rollup was lost (kill -9), and the minute being summarised now, whose stored rollup (if the
  // agent restarted inside it) is only part of it.
  std::vector<std::pair<std::int64_t, std::string>> newest_first;
  std::int64_t covered_until = INT64_MIN;  // rows before this are in the rollups already read
  if (!step_ms) {
    scan_ticks(conn->db(), conn->ticks(), since_ms, until_ms, true,
               [&](std::int64_t ts, std::string_view blob) {
                 newest_first.emplace_back(ts, std::string(blob));
                 return newest_first.size() < q.limit;
               });
  } else {
    std::int64_t raw_from = since_ms;  // samples from here on are not in a rollup read
    if (step_ms >= kRollupMs) {
      const std::int64_t open = src.open_minute.load(std::memory_order_acquire);
      // Minutes starting in [lo, hi] are read from their rollup; their rows are keyed up to hi_key.
      const std::int64_t lo = minus_saturating(since_ms, kRollupMs - 1);
      const std::int64_t hi = open == INT64_MAX ? until_ms : std::min(until_ms, open - 1);
      const std::int64_t hi_key = hi > INT64_MAX - kRollupMs ? INT64_MAX
                                  : hi < INT64_MIN + kRollupMs
                                      ? hi
                                      : floor_to(hi, kRollupMs) + kRollupMs - 1;
      // A minute that has a rollup (its group 0 row), first sample at first_ts: false if it is
      // read from its samples instead (it has samples before the window).
      auto take_minute = [&](std::int64_t minute, std::int64_t first_ts) {
        if (first_ts < since_ms) return false;
        if (minute > raw_from) scan(raw_from, minute - 1, add_row);
        raw_from = covered_until = minute + kRollupMs;
        return true;
      };
      std::vector<std::uint32_t> ids;  // wanted, if few
      for (std::uint32_t id = 1; id < wanted.size() && ids.size() <= kNarrowSeries; ++id)
        if (wanted[id]) ids.push_back(id);
      if (ids.size() > kNarrowSeries || hi < lo) {
        // Every row of every minute, group 0 first.
        std::int64_t taken = INT64_MIN, taken_first = 0;
        scan_rollups(lo, hi_key, [&](std::int64_t key, std::string_view blob) {
          const std::int64_t minute = floor_to(key, kRollupMs);
          if (minute < lo) return;
          if (key == minute) {
            const std::int64_t first_ts = minute + first_sample_offset(blob);
            if (!take_minute(minute, first_ts)) return;
            taken = minute, taken_first = first_ts;
          } else if (minute != taken) {
            return;  // a minute without a group 0 row is not a rollup
          }
          add_rollup(minute, taken_first, blob);
        });
      } else {
        // A few series: closed hours from their hour rows (the minute map, then a row per
        // series), other minutes from group 0 and the groups of those series; each row by its
        // key, so the cost does not grow with the series in the file.
        std::vector<std::uint32_t> groups;
        for (auto id : ids)
          if (id / kGroupSeries && (groups.empty() || groups.back() != id / kGroupSeries))
            groups.push_back(id / kGroupSeries);
        std::string buf;
        // Calls fn(unpacked data) for the row at `key` of `st`, if there is one that unpacks.
        auto row_at = [&](sql::Statement& st, std::int64_t key, auto&& fn) {
          auto rows = st.query(key);
          if (rows.next())
            if (auto blob = sample_codec::unpack(rows.blob(0), buf)) fn(*blob);
          if (rows.failed()) throw conn->db().error("cannot read history");
        };
        std::int64_t probed_hour = INT64_MIN;
        bool folded = false;
        std::vector<std::pair<std::uint32_t, std::int64_t>> minutes;  // of the hour: m, offset
        std::vector<double> five(ids.size() * 300);
        std::vector<char> has(ids.size() * 60);
        for (std::int64_t cursor = lo; cursor <= hi;) {
          std::int64_t minute;
          std::string row;  // group 0 of this minute, unpacked
          bool have_row = false;
          {
            auto rows = conn->rollup_next().query(cursor, hi_key);
            if (!rows.next()) {
              if (rows.failed()) throw conn->db().error("cannot read history");
              break;
            }
            const std::int64_t key = rows.int64(0);
            minute = floor_to(key, kRollupMs);
            if (key == minute && minute >= lo)
              if (auto blob = sample_codec::unpack(rows.blob(1), buf))
                row.assign(*blob), have_row = true;
          }
          if (minute < lo) {
            cursor = minute + kRollupMs;
            continue;
          }
          const std::int64_t hour = floor_to(minute, kHourMs);
          if (hour != probed_hour) {
            probed_hour = hour;
            folded = false;
            minutes.clear();
            row_at(conn->hour_at(), hour, [&](std::string_view blob) {
              sample_codec::decode(blob, [&](std::uint32_t m, double v) {
                minutes.emplace_back(m, static_cast<std::int64_t>(v));
              });
              folded = true;
            });
            if (folded) {
              std::fill(has.begin(), has.end(), 0);
              for (std::size_t i = 0; i < ids.size(); ++i)
                row_at(conn->hour_at(), hour + ids[i], [&](std::string_view blob) {
                  sample_codec::decode(blob, [&](std::uint32_t key5, double v) {
                    if (key5 >= 300) return;
                    five[i * 300 + key5] = v;
                    if (key5 % 5 == 4) has[i * 60 + key5 / 5] = 1;
                  });
                });
            }
          }
          if (folded) {
            for (auto& [m, offset] : minutes) {
              const std::int64_t at = hour + static_cast<std::int64_t>(m) * kRollupMs;
              if (m >= 60 || at < cursor || at > hi) continue;
              const std::int64_t first_ts = at + offset;
              if (!take_minute(at, first_ts)) continue;
              const std::size_t bucket = bucket_of(floor_to(at, step_ms), first_ts);
              for (std::size_t i = 0; i < ids.size(); ++i)
                if (has[i * 60 + m])
                  add_parts(bucket, ids[i], &five[i * 300 + m * 5], five[i * 300 + m * 5 + 4]);
            }
            if (hour > INT64_MAX - kHourMs) break;
            cursor = hour + kHourMs;
            continue;
          }
          cursor = minute + kRollupMs;
          if (!have_row) continue;  // no group 0 row: not a rollup
          const std::int64_t first_ts = minute + first_sample_offset(row);
          if (!take_minute(minute, first_ts)) continue;
          add_rollup(minute, first_ts, row);
          for (auto g : groups)
            row_at(conn->rollup_at(), minute + g,
                   [&](std::string_view blob) { add_rollup(minute, first_ts, blob); });
        }
      }
    }
    scan(raw_from, until_ms, add_row);
  }
  src.pool.give_back(std::move(conn));

  // Rows not yet committed are the newest; merge those in the window.
  std::vector<std::pair<std::int64_t, std::string>> pending;
  src.queue.for_each([&](std::int64_t ts, const std::string& blob) {
    if (ts >= since_ms && ts <= until_ms) pending.emplace_back(ts, blob);
  });
  // A row may be both committed and still queued while a flush finishes: keep one copy.
  std::int64_t committed_max = INT64_MIN;
  if (step_ms) {
    committed_max =
        covered_until == INT64_MIN ? last_row_ts : std::max(last_row_ts, covered_until - 1);
    for (auto& [ts, blob] : pending)
      if (ts > committed_max) add_row(ts, blob);
  } else {
    if (!newest_first.empty()) committed_max = newest_first.front().first;
    std::vector<std::pair<std::int64_t, std::string>> merged;
    for (auto it = pending.rbegin(); it != pending.rend(); ++it)
      if (it->first > committed_max) merged.push_back(std::move(*it));
    for (auto& row : newest_first) merged.push_back(std::move(row));
    if (merged.size() > q.limit) merged.resize(q.limit);
    newest_first = std::move(merged);
    for (auto it = newest_first.rbegin(); it != newest_first.rend(); ++it)
      add_row(it->first, it->second);
  }

  // Keep the latest `limit` points.
  const std::size_t points = bucket_start.size();
  const std::size_t skip = points > q.limit ? points - q.limit : 0;
  HistoryResult out;
  out.timestamps.reserve(points - skip);
  for (std::size_t i = skip; i < points; ++i)
    out.timestamps.push_back(static_cast<double>(bucket_label[i]) / 1000.0);
  // Stable output order: by series id (the order the agent first saw them).
  std::sort(columns.begin(), columns.end(),
            [](const Column& a, const Column& b) { return a.series_index < b.series_index; });
  for (auto& c : columns) {
    c.value.resize(points, 0);
    c.n.resize(points, 0);
    std::vector<double> values;
    values.reserve(points - skip);
    bool any = false;
    for (std::size_t i = skip; i < points; ++i) {
      double v = c.n[i] == 0                      ? std::nan("")
                 : q.aggregate == Aggregate::mean ? c.value[i] / c.n[i]
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

}  // namespace

}  // namespace kiwi::agent
