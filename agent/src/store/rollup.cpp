// The writer's minute summaries, kept in memory for the hour in progress, and their folding into
// hour rows and day rows (the layout: rollup.hpp, schema.hpp).
#include "store/rollup.hpp"

#include <algorithm>

#include "store/millis.hpp"
#include "store/store.hpp"
#include "store/writer.hpp"

namespace kiwi::agent {

// Encoding sorts keys, so key 0 is the first entry when present.
std::int64_t first_sample_offset(std::string_view blob) {
  if (blob.empty() || blob.front() != sample_codec::kFormat2) return 0;
  blob.remove_prefix(1);
  std::uint64_t head = 0, v = 0;
  if (!sample_codec::get_varint(blob, head) || head >> 3 != 0) return 0;
  switch (head & 7) {
    case 0:
      return sample_codec::get_varint(blob, v) ? sample_codec::unzigzag(v) : 0;
    case 5:
      return sample_codec::get_varint(blob, v) ? sample_codec::unzigzag(v) * 1024 : 0;
    default:
      return 0;  // 3: the value 0; a float is never written for it
  }
}

void Writer::MinuteFold::add(std::int64_t ts_ms,
                             const std::vector<std::pair<std::uint32_t, double>>& values) {
  first = std::min(first, ts_ms);
  for (auto& [id, v] : values) {
    if (stats.size() <= id) stats.resize(id + 1);
    Stats& m = stats[id];
    m.min = m.n ? std::min(m.min, v) : v;
    m.max = m.n ? std::max(m.max, v) : v;
    m.sum += v;
    m.last = v;
    ++m.n;
  }
}

void Writer::MinuteFold::reset(std::int64_t minute) {
  start = minute;
  first = INT64_MAX;
  stats.assign(stats.size(), Stats{});
}

// A minute's rows (rollup.hpp), one per group.
MinuteRows Writer::MinuteFold::rows() const {
  constexpr std::uint32_t kGroup = Store::kGroupSeries;
  MinuteRows out{start, {}};
  std::vector<std::pair<std::uint32_t, double>> values;
  values.emplace_back(0, static_cast<double>(first - start));
  for (std::uint32_t g = 0; g * kGroup < stats.size(); ++g) {
    const auto end = std::min<std::size_t>(stats.size(), (g + 1) * kGroup);
    for (std::uint32_t id = g * kGroup; id < end; ++id) {
      const Stats& m = stats[id];
      if (!m.n) continue;
      values.insert(values.end(), {{id * 5 + 0, m.sum / m.n},
                                   {id * 5 + 1, m.min},
                                   {id * 5 + 2, m.max},
                                   {id * 5 + 3, m.last},
                                   {id * 5 + 4, static_cast<double>(m.n)}});
    }
    out.groups.emplace_back();
    if (values.empty()) continue;
    std::string blob;
    sample_codec::encode(blob, values);
    out.groups.back() = sample_codec::pack_if_smaller(std::move(blob));
    values.clear();
  }
  return out;
}

// Calls fn(ts, values) for each tick in [from, to]: from the file, then the queue (newer than
// what is committed). A tick that does not decode is left out, as queries read around it. Ids in
// tick rows are the catalogue's ids (loaded from the same file at open, new series appended
// after them).
void Writer::each_tick(std::int64_t from, std::int64_t to, const TickFn& fn) {
  if (to < from) return;
  const std::size_t known = series_.size();  // ids 1..known are in the catalogue
  std::vector<std::pair<std::uint32_t, double>> values;
  std::int64_t done_until = INT64_MIN;
  auto add = [&](std::int64_t ts, std::string_view blob) {
    values.clear();
    try {
      sample_codec::decode(blob, [&](std::uint32_t id, double v) {
        if (id >= 1 && id <= known) values.emplace_back(id, v);
      });
    } catch (const StoreError&) {
      return true;
    }
    fn(ts, values);
    done_until = ts;
    return true;
  };
  if (file_.db.is_open()) {  // none: no file open now
    try {
      scan_ticks(file_.db, file_.ticks, from, to, false, add);
    } catch (const StoreError&) {
      // The file's ticks are missed (the commit that follows will say what is wrong with it).
    }
  }
  queue_.for_each([&](std::int64_t ts, const std::string& blob) {
    if (ts >= from && ts <= to && ts > done_until) add(ts, blob);
  });
}

// The minute summaries of the ticks in [from, to].
std::vector<MinuteRows> Writer::summarise(std::int64_t from, std::int64_t to) {
  std::vector<MinuteRows> out;
  MinuteFold fold;
  each_tick(from, to, [&](std::int64_t ts, const std::vector<std::pair<std::uint32_t, double>>& v) {
    const std::int64_t minute = floor_to(ts, Store::kRollupMs);
    if (minute != fold.start) {
      if (!fold.empty()) out.push_back(fold.rows());
      fold.reset(minute);
    }
    fold.add(ts, v);
  });
  if (!fold.empty()) out.push_back(fold.rows());
  return out;
}

// A minute of another hour begins (the next hour, or one the clock went back or forward to): the
// hour in progress is closed, to be written by the next commit; hours of the file left unfolded
// (found at open) are summarised from their ticks for it too; and the minutes of the new hour
// before `minute` that already have ticks (a restart or a kill inside the hour, the clock gone
// back into it) are summarised from them, so its rows, written when it is over, are whole. The
// usual case, a new hour nobody wrote yet, costs one indexed probe that finds no tick.
void Writer::open_hour(std::int64_t hour, std::int64_t minute) {
  auto close = [&](std::int64_t h, std::vector<MinuteRows> minutes) {
    if (minutes.empty()) return;
    std::erase_if(closed_hours_, [&](const auto& c) { return c.first == h; });
    closed_hours_.emplace_back(h, std::move(minutes));
    // Bounded (a store failing for a day or more): the oldest hour goes first.
    if (closed_hours_.size() > 24) closed_hours_.erase(closed_hours_.begin());
  };
  if (hour_ != INT64_MIN) close(hour_, std::move(hour_minutes_));
  hour_minutes_.clear();
  if (recover_from_ < hour) {
    std::vector<MinuteRows> found = summarise(recover_from_, hour - 1);
    for (std::size_t i = 0, j; i < found.size(); i = j) {
      const std::int64_t h = floor_to(found[i].minute, Store::kHourMs);
      std::vector<MinuteRows> minutes;
      for (j = i; j < found.size() && floor_to(found[j].minute, Store::kHourMs) == h; ++j)
        minutes.push_back(std::move(found[j]));
      close(h, std::move(minutes));
    }
  }
  recover_from_ = INT64_MAX;
  hour_ = hour;
  std::erase_if(closed_hours_, [&](const auto& c) { return c.first == hour; });
  hour_minutes_ = summarise(hour, minute - 1);
  publish();
}

// A minute starts being summarised in memory. Its summary must cover every sample of that minute,
// including those it already has: written before a restart inside the minute (the collector
// closes the minute and flushes at stop, then the next run starts with no minute state), before
// a kill -9 (up to the last commit), or before close_current_minute() in this process. So the
// in-memory state is seeded by folding that minute's samples, from the file and from the queue,
// and close_minute() then replaces the closed summary of the minute, if there is one, with the
// complete one. The usual case, a minute nobody wrote yet, costs one indexed probe.
void Writer::begin_minute(std::int64_t minute) {
  if (!hour_minutes_.empty() && hour_minutes_.back().minute == minute) hour_minutes_.pop_back();
  minute_.reset(minute);
  each_tick(minute, minute + Store::kRollupMs - 1,
            [&](std::int64_t ts, const std::vector<std::pair<std::uint32_t, double>>& v) {
              minute_.add(ts, v);
            });
  open_minute_.store(minute, std::memory_order_release);
}

void Writer::close_current_minute() {
  close_minute();
  minute_.start = INT64_MIN;  // the next append, even in this minute, begins it afresh
  open_minute_.store(INT64_MAX, std::memory_order_release);
}

// The minute's summary joins its hour's (written with the hour's rows when the hour is over).
void Writer::close_minute() {
  if (minute_.empty()) return;
  hour_minutes_.push_back(minute_.rows());
  minute_.reset(INT64_MIN);
  publish();
}

// What readers find in memory: the closed hours not committed yet, then the hour in progress.
void Writer::publish() {
  std::vector<MinuteRows> all;
  for (auto& [h, minutes] : closed_hours_) all.insert(all.end(), minutes.begin(), minutes.end());
  all.insert(all.end(), hour_minutes_.begin(), hour_minutes_.end());
  std::sort(all.begin(), all.end(),
            [](const MinuteRows& a, const MinuteRows& b) { return a.minute < b.minute; });
  board_.publish(std::move(all));
}

// The hour rows of `hour` (rollup.hpp), from its minutes' summaries.
void Writer::fold_hour(std::int64_t hour, const std::vector<MinuteRows>& minutes) {
  constexpr std::int64_t kMinute = Store::kRollupMs;
  step_range(file_.delete_hour, hour, hour + Store::kHourMs - 1, "cannot write hour rows");
  std::vector<std::pair<std::uint32_t, double>> map;                // m -> first-sample offset
  std::vector<std::vector<std::pair<std::uint32_t, double>>> rows;  // by series id
  std::string buf;
  for (auto& pm : minutes) {
    if (pm.groups.empty() || pm.minute < hour || pm.minute >= hour + Store::kHourMs) continue;
    const auto m = static_cast<std::uint32_t>((pm.minute - hour) / kMinute);
    for (std::size_t g = 0; g < pm.groups.size(); ++g) {
      auto blob = sample_codec::unpack(pm.groups[g], buf);
      if (!blob) continue;
      sample_codec::decode(*blob, [&](std::uint32_t key, double v) {
        const std::uint32_t id = key / 5;
        if (id == 0) {
          if (key == 0) map.emplace_back(m, v);  // group 0's first-sample offset
          return;
        }
        if (rows.size() <= id) rows.resize(id + 1);
        rows[id].emplace_back(m * 5 + key % 5, v);
      });
    }
  }
  if (map.empty()) return;
  auto put = [&](std::int64_t ts, std::vector<std::pair<std::uint32_t, double>>& values) {
    std::string blob;
    sample_codec::encode(blob, values);
    blob = sample_codec::pack_if_smaller(std::move(blob));
    if (file_.insert_hour.execute(ts, sql::Blob{blob}) != sql::kDone)
      fail("cannot write hour rows");
  };
  for (std::uint32_t id = 1; id < rows.size(); ++id)
    if (!rows[id].empty()) put(hour + id, rows[id]);
  put(hour, map);
}

// The day rows of `day` (rollup.hpp), from its hour rows: each folded hour's minutes summarised
// per series into one hour (the sum of its values, as a query adds up the minutes' means times
// their counts, in the same order: an hour's bucket reads the same from either; min, max, the last
// minute's last, the count).
// An hour without hour rows is missing from them, as its minutes are from the hour rows.
void Writer::fold_day(std::int64_t day) {
  constexpr std::int64_t kHour = Store::kHourMs;
  const std::int64_t end = day + Store::kDayMs - 1;
  step_range(file_.delete_day, day, end, "cannot write day rows");
  struct HourStats {
    double sum = 0, min = 0, max = 0, last = 0, n = 0;
    int last_minute = -1;
  };
  std::vector<std::pair<std::uint32_t, double>> hours;              // h -> first-sample offset
  std::vector<std::vector<std::pair<std::uint32_t, double>>> rows;  // by series id
  std::vector<HourStats> stats;                                     // by series id, this hour
  std::string buf;
  for (std::uint32_t h = 0; h < 24; ++h) {
    const std::int64_t hour = day + h * kHour;
    bool folded = false;
    std::int64_t first = INT64_MAX;
    std::fill(stats.begin(), stats.end(), HourStats{});
    auto found = file_.hours_range.query(hour, hour + kHour - 1);
    while (found.next()) {
      const auto id = static_cast<std::uint32_t>(found.int64(0) - hour);
      auto blob = sample_codec::unpack(found.blob(1), buf);
      if (!blob) continue;  // a damaged row: the hour without that series
      try {
        if (id == 0) {  // the minute map: m -> offset of its first sample
          sample_codec::decode(*blob, [&](std::uint32_t m, double offset) {
            first = std::min(first, static_cast<std::int64_t>(m) * Store::kRollupMs +
                                        static_cast<std::int64_t>(offset));
          });
          folded = true;
          continue;
        }
        if (stats.size() <= id) stats.resize(id + 1);
        HourStats& s = stats[id];
        for_each_summary(*blob, [&](std::uint32_t m, const double* parts, double v) {
          if (m >= 60) return;
          s.min = s.n ? std::min(s.min, parts[1]) : parts[1];
          s.max = s.n ? std::max(s.max, parts[2]) : parts[2];
          s.sum += parts[0] * v;
          s.n += v;
          if (static_cast<int>(m) > s.last_minute) s.last = parts[3], s.last_minute = m;
        });
      } catch (const StoreError&) {
        stats[id] = HourStats{};  // a row that does not decode: the hour without that series
      }
    }
    if (found.failed()) fail("cannot read hour rows");
    if (!folded || first == INT64_MAX) continue;
    hours.emplace_back(h, static_cast<double>(first));
    if (rows.size() < stats.size()) rows.resize(stats.size());
    for (std::uint32_t id = 1; id < stats.size(); ++id) {
      const HourStats& s = stats[id];
      if (!(s.n > 0)) continue;
      rows[id].insert(rows[id].end(), {{h * 5 + 0, s.sum},
                                       {h * 5 + 1, s.min},
                                       {h * 5 + 2, s.max},
                                       {h * 5 + 3, s.last},
                                       {h * 5 + 4, s.n}});
    }
  }
  if (hours.empty()) return;
  auto put = [&](std::int64_t ts, std::vector<std::pair<std::uint32_t, double>>& values) {
    std::string blob;
    sample_codec::encode(blob, values, true);  // sums as the minutes add up, bit for bit
    // Not deflated: a year's chart reads 365 rows a series, and inflating each (its own Huffman
    // tables for 0.5 kB) took 60 % of the query (33 series: 105 -> 44 ms; the rows take 2.1x the
    // bytes, 17 -> 36 MB a year at 196 series; tools/bench/history_year.cpp).
    if (file_.insert_day.execute(ts, sql::Blob{blob}) != sql::kDone) fail("cannot write day rows");
  };
  for (std::uint32_t id = 1; id < rows.size(); ++id)
    if (!rows[id].empty()) put(day + id, rows[id]);
  put(day, hours);
}

}  // namespace kiwi::agent
