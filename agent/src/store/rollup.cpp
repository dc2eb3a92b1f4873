// The writer's minute summaries and their folding into hour rows (the layout: rollup.hpp).
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

void Writer::add_to_minute(std::int64_t ts_ms,
                           const std::vector<std::pair<std::uint32_t, double>>& values) {
  minute_first_ = std::min(minute_first_, ts_ms);
  for (auto& [id, v] : values) {
    if (minute_.size() <= id) minute_.resize(id + 1);
    MinuteStats& m = minute_[id];
    m.min = m.n ? std::min(m.min, v) : v;
    m.max = m.n ? std::max(m.max, v) : v;
    m.sum += v;
    m.last = v;
    ++m.n;
  }
}

// A minute starts being summarised in memory. Its summary must cover every sample of that minute,
// including those it already has: written before a restart inside the minute (the collector
// closes the minute and flushes at stop, then the next run starts with no minute state), before
// a kill -9 (up to the last commit), or before close_current_minute() in this process. So the
// in-memory state is seeded by folding that minute's samples, from the file and from the queue,
// and close_minute() then replaces any stored row of the minute with the complete one.
// One code path for every case. The samples are folded rather than the stored row merged
// (mean x count): the row is itself a summary of exactly these samples, folding them keeps sums
// exact, and it also covers a minute whose row was never written (kill -9). Ids in sample rows
// are the catalogue's ids (loaded from the same file at open, new series appended after them).
// The usual case, a minute nobody wrote yet, costs one indexed probe that finds no row.
void Writer::begin_minute(std::int64_t minute) {
  minute_start_ = minute;
  minute_first_ = INT64_MAX;
  const std::int64_t end = minute + Store::kRollupMs;
  const std::size_t known = series_.size();  // ids 1..known are in the catalogue
  std::vector<std::pair<std::uint32_t, double>> values;
  std::int64_t folded_until = INT64_MIN;
  auto fold = [&](std::int64_t ts, std::string_view blob) {
    values.clear();
    try {
      sample_codec::decode(blob, [&](std::uint32_t id, double v) {
        if (id >= 1 && id <= known) values.emplace_back(id, v);
      });
    } catch (const StoreError&) {
      return true;  // a damaged row: summarised without it, as queries read around it
    }
    add_to_minute(ts, values);
    folded_until = ts;
    return true;
  };
  if (file_.db.is_open()) {  // none: no file open now
    try {
      scan_ticks(file_.db, file_.ticks, minute, end - 1, false, fold);
    } catch (const StoreError&) {
      // The file's ticks are missed (the commit that follows will say what is wrong with it).
    }
  }
  // Queued rows are newer than committed ones.
  queue_.for_each([&](std::int64_t ts, const std::string& blob) {
    if (ts >= minute && ts < end && ts > folded_until) fold(ts, blob);
  });
  open_minute_.store(minute, std::memory_order_release);
}

void Writer::close_current_minute() {
  close_minute();
  minute_start_ = INT64_MIN;  // the next append, even in this minute, begins it afresh
  open_minute_.store(INT64_MAX, std::memory_order_release);
}

// A minute's rows (rollup.hpp), one per group, queued for the next commit.
void Writer::close_minute() {
  bool any = false;
  for (auto& m : minute_) any = any || m.n;
  if (!any) return;
  constexpr std::uint32_t kGroup = Store::kGroupSeries;
  PendingMinute out{minute_start_, {}};
  std::vector<std::pair<std::uint32_t, double>> values;
  values.emplace_back(0, static_cast<double>(minute_first_ - minute_start_));
  for (std::uint32_t g = 0; g * kGroup < minute_.size(); ++g) {
    const auto end = std::min<std::size_t>(minute_.size(), (g + 1) * kGroup);
    for (std::uint32_t id = g * kGroup; id < end; ++id) {
      const MinuteStats& m = minute_[id];
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
  minute_.assign(minute_.size(), MinuteStats{});
  pending_rollups_.push_back(std::move(out));
  if (pending_rollups_.size() > Store::kMaxPendingRows / 60)
    pending_rollups_.erase(pending_rollups_.begin());
}

// The hour rows of `hour` (rollup.hpp), from its minute rows.
void Writer::fold_hour(std::int64_t hour) {
  constexpr std::uint32_t kGroup = Store::kGroupSeries;
  constexpr std::int64_t kMinute = Store::kRollupMs;
  const std::int64_t end = hour + Store::kHourMs - 1;
  auto clear_hour = [&] { step_range(file_.delete_hour, hour, end, "cannot write hour rows"); };
  clear_hour();
  std::vector<std::pair<std::uint32_t, double>> minutes;  // m -> first-sample offset
  std::vector<std::vector<std::pair<std::uint32_t, double>>> rows(kGroup);
  std::string buf;
  bool ok = true;
  // Decodes a minute row (already unpacked) of minute m, group g, into `rows`.
  auto take = [&](std::uint32_t m, std::uint32_t g, std::string_view blob) {
    try {
      sample_codec::decode(blob, [&](std::uint32_t key, double v) {
        const std::uint32_t id = key / 5;
        if (id == 0) return;
        if (id / kGroup != g) return void(ok = false);
        rows[id % kGroup].emplace_back(m * 5 + key % 5, v);
      });
    } catch (const StoreError&) {
      ok = false;
    }
  };
  auto put = [&](std::int64_t ts, std::vector<std::pair<std::uint32_t, double>>& values) {
    std::string blob;
    sample_codec::encode(blob, values);
    blob = sample_codec::pack_if_smaller(std::move(blob));
    if (file_.insert_hour.execute(ts, sql::Blob{blob}) != sql::kDone)
      fail("cannot write hour rows");
    values.clear();
  };
  auto put_group = [&](std::uint32_t g) {
    for (std::uint32_t i = 0; i < kGroup; ++i)
      if (!rows[i].empty()) put(hour + g * kGroup + i, rows[i]);
  };
  // Group 0 of each minute: the minute map, and ids 1..63.
  for (std::int64_t cursor = hour; ok && cursor <= end;) {
    auto found = file_.rollup_next.query(cursor, end);
    if (!found.next()) {
      if (found.failed()) fail("cannot read rollups");
      break;
    }
    const std::int64_t key = found.int64(0);
    const std::int64_t minute = floor_to(key, kMinute);
    const auto m = static_cast<std::uint32_t>((minute - hour) / kMinute);
    if (key == minute)
      if (auto blob = sample_codec::unpack(found.blob(1), buf)) {
        minutes.emplace_back(m, static_cast<double>(first_sample_offset(*blob)));
        take(m, 0, *blob);
      }
    cursor = minute + kMinute;
  }
  if (!ok || minutes.empty()) return clear_hour();
  put_group(0);
  for (std::uint32_t g = 1; ok && g * kGroup <= series_.size(); ++g) {
    for (auto& [m, offset] : minutes) {
      auto found = file_.rollup_at.query(hour + m * kMinute + g);
      if (found.next())
        if (auto blob = sample_codec::unpack(found.blob(0), buf)) take(m, g, *blob);
      if (found.failed()) fail("cannot read rollups");
    }
    if (ok) put_group(g);
  }
  if (!ok) return clear_hour();
  put(hour, minutes);
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
        double parts[4] = {};
        sample_codec::decode(*blob, [&](std::uint32_t key5, double v) {
          const std::uint32_t m = key5 / 5, k = key5 % 5;
          if (m >= 60) return;
          if (k < 4) return void(parts[k] = v);
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
    blob = sample_codec::pack_if_smaller(std::move(blob));
    if (file_.insert_day.execute(ts, sql::Blob{blob}) != sql::kDone) fail("cannot write day rows");
  };
  for (std::uint32_t id = 1; id < rows.size(); ++id)
    if (!rows[id].empty()) put(day + id, rows[id]);
  put(day, hours);
}

}  // namespace kiwi::agent
