// The store's cadence: readings are queued every tick and committed every commit_interval of
// stamps, and what is queued at stop is committed.
#include <catch2/catch.hpp>
#include <filesystem>

#include "collect/store_cadence.hpp"
#include "fake_clock.hpp"
#include "store/store.hpp"
#include "test_support.hpp"

using namespace kiwi::agent;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {
using Lines = kiwi_test::LogLines;

// A cadence on a real store, and the one reading it appends each tick.
struct Cadence {
  kiwi_test::TempDb db;
  Store store{db.path()};
  Lines log;
  CollectorStats stats;
  StoreCadence cadence{store, log, stats};
  CollectorSettings settings;
  const kiwi::MetricValue m{"m", {}, 1, "ratio", kiwi::MetricKind::gauge};
  const std::vector<const kiwi::MetricValue*> values{&m};
  void append(std::int64_t ts) { cadence.append(ts, values, settings); }
};
}  // namespace

TEST_CASE("store cadence: a commit every commit_interval of stamps, and one at stop") {
  Cadence c;
  c.settings.commit_interval = 10s;
  // Ticks of 1 s from 1 s on: the first commit is due 10 s of stamps after the first tick.
  for (std::int64_t ts = 1000; ts <= 10'000; ts += 1000) c.append(ts);
  CHECK(c.store.pending_rows() == 10);
  c.append(11'000);
  CHECK(c.store.pending_rows() == 0);
  c.append(12'000);
  CHECK(c.store.pending_rows() == 1);
  // At stop: committed at once; the clock would only be waited on for a second try.
  FakeClock clock;
  const auto t0 = clock.steady_now();
  c.cadence.finish(12'000, c.settings, 500ms, clock);
  CHECK(c.store.pending_rows() == 0);
  CHECK(clock.steady_now() == t0);
  CHECK(c.stats.store_errors == 0);
  CHECK(c.cadence.last_error().empty());
  CHECK(c.log.lines.empty());
  CHECK(c.store.query({}).timestamps.size() == 12);
}

TEST_CASE("store cadence: each tier is pruned at its own retention") {
  // Five days of a tick every 10 minutes, a commit each: raw ticks kept 2 h, minute summaries
  // 2 days, hour summaries 3 days (three different cutoffs, so a mix-up of two shows).
  Cadence c;
  c.settings.commit_interval = 10min;
  c.settings.retention = 2h;
  c.settings.minute_retention = 48h;
  c.settings.hour_retention = 72h;
  constexpr std::int64_t kMin = 60'000, kHour = 60 * kMin, kDay = 24 * kHour;
  const std::int64_t t0 = 1'764'460'800'000, end = t0 + 5 * kDay + 7 * kHour;  // 07:00 day 5
  for (std::int64_t ts = t0; ts <= end; ts += 10 * kMin) c.append(ts);
  auto oldest = [&](const char* table) {
    return std::stoll(kiwi_test::sqlite_value(
        c.db.path(), (std::string("SELECT min(ts) FROM ") + table).c_str()));
  };
  // Ticks: read as gone once older than 2 h; their files deleted once every tick in them is
  // (a file holds blocks that start in its hour, and a block spans at most 5 minutes).
  CHECK(c.store.read_raw(INT64_MIN, 1).at(0).ts_ms == end - 2 * kHour);
  CHECK_FALSE(
      fs::exists(c.db.path() + "-ticks/" + std::to_string((end - 4 * kHour) / 1000) + ".ticks"));
  CHECK(fs::exists(c.db.path() + "-ticks/" + std::to_string((end - 3 * kHour) / 1000) + ".ticks"));
  // Minute summaries: whole hours, gone once their hour ended 2 days before.
  CHECK(oldest("hours") == end - 2 * kDay);
  // Hour summaries: whole days, gone once their day ended 3 days before (day 2 ends at day 3).
  CHECK(oldest("days") == t0 + 2 * kDay);
  CHECK(c.stats.store_errors == 0);
}
