// The measurement made before schema 4 was built (issue 17, item 3: a 24 h, 1,000-point query of
// one series in <= 5 ms whatever the number of other series); the store now has this layout
// (schema.hpp), and kiwi-bench-history --series measures the store itself. Schema 3 was one row
// per minute holding every series, so a one-series day read and inflated all 1,440 of them.
// The layout measured here, in a scratch SQLite file with the store's page size, cache and codec:
//   - per-series hour rows, keyed hour_ms + series id (the 60 minutes x 5 values of one series,
//     written once at the end of the hour, so they append at the right edge of their table);
//   - the minute rows cut into rows of 64 series, keyed minute_ms + group, for the open hour.
// A one-series day is then 23 hour rows and at most 60 minute rows, whatever the series count.
// Prints per size the bytes each layout stores per hour (today's whole-minute rows, the grouped
// minute rows, the hour rows) and the read time of one series, first and last id.
// Built with the tests: build/bin/kiwi-bench-rollup-layout [N ...] (default 80 393 1537 6115).
// Writes under /tmp/kiwi-rollup-layout-bench and removes it after each size.
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "store/sample_codec.hpp"

using namespace kiwi::agent;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::int64_t kT0 = 1'764'460'800'000;  // a whole day boundary, unix ms
constexpr int kGroup = 64;                       // series per minute row
constexpr std::int64_t kHourMs = 3'600'000;

void exec(sqlite3* db, const char* sql) {
  if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
    std::fprintf(stderr, "%s: %s\n", sql, sqlite3_errmsg(db));
    std::exit(1);
  }
}

void insert(sqlite3_stmt* st, std::int64_t key, const std::string& blob) {
  sqlite3_bind_int64(st, 1, key);
  sqlite3_bind_blob(st, 2, blob.data(), static_cast<int>(blob.size()), SQLITE_STATIC);
  if (sqlite3_step(st) != SQLITE_DONE) std::exit(1);
  sqlite3_reset(st);
}

std::string packed(std::vector<std::pair<std::uint32_t, double>>& values) {
  std::string blob;
  sample_codec::encode(blob, values);
  return sample_codec::pack_if_smaller(std::move(blob));
}

// The row at `key` (if any), unpacked and decoded into fn(key, value).
template <class Fn>
void read_row(sqlite3_stmt* st, std::int64_t key, std::string& buf, Fn&& fn) {
  sqlite3_bind_int64(st, 1, key);
  if (sqlite3_step(st) == SQLITE_ROW) {
    std::string_view stored(static_cast<const char*>(sqlite3_column_blob(st, 0)),
                            static_cast<std::size_t>(sqlite3_column_bytes(st, 0)));
    if (auto data = sample_codec::unpack(stored, buf)) sample_codec::decode(*data, fn);
  }
  sqlite3_reset(st);
}

template <class Fn>
double median_ms(Fn&& run) {
  std::vector<double> ms;
  for (int i = 0; i < 5; ++i) {
    auto start = Clock::now();
    run();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[2];
}

void measure(int n) {
  const std::filesystem::path dir = "/tmp/kiwi-rollup-layout-bench";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "layout.db").string();
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  exec(db, "PRAGMA page_size=1024");  // the store's pragmas
  exec(db, "PRAGMA journal_mode=WAL");
  exec(db, "PRAGMA synchronous=NORMAL");
  exec(db, "PRAGMA cache_size=-32");
  exec(db, "CREATE TABLE minutes(ts INTEGER PRIMARY KEY, data BLOB NOT NULL)");
  exec(db, "CREATE TABLE hours(ts INTEGER PRIMARY KEY, data BLOB NOT NULL)");
  sqlite3_stmt *put_minute = nullptr, *put_hour = nullptr;
  sqlite3_prepare_v2(db, "INSERT INTO minutes VALUES(?1, ?2)", -1, &put_minute, nullptr);
  sqlite3_prepare_v2(db, "INSERT INTO hours VALUES(?1, ?2)", -1, &put_hour, nullptr);

  // A day of minute summaries of kiwi-bench-history's samples ((t % 100) / 100 + 0.001 * i).
  double whole_bytes = 0, group_bytes = 0, hour_bytes = 0;
  std::vector<std::vector<std::pair<std::uint32_t, double>>> hour(static_cast<std::size_t>(n) + 1);
  for (int m = 0; m < 1440; ++m) {
    exec(db, "BEGIN");
    std::vector<std::pair<std::uint32_t, double>> whole, group;
    for (int id = 1; id <= n; ++id) {
      double lo = 1e300, hi = -1e300, sum = 0, last = 0;
      for (int s = 0; s < 60; ++s) {
        const double v = ((m * 60 + s) % 100) / 100.0 + 0.001 * (id - 1);
        lo = std::min(lo, v), hi = std::max(hi, v), sum += v, last = v;
      }
      const double five[5] = {sum / 60, lo, hi, last, 60};
      for (std::uint32_t k = 0; k < 5; ++k) {
        const auto key = static_cast<std::uint32_t>(id) * 5 + k;
        whole.emplace_back(key, five[k]);
        group.emplace_back(key, five[k]);
        hour[static_cast<std::size_t>(id)].emplace_back(
            static_cast<std::uint32_t>(m % 60) * 5 + k + 1, five[k]);
      }
      if (id % kGroup == 0 || id == n) {
        group.emplace_back(0, 0.0);  // the first sample's offset, as in every rollup row
        const std::string blob = packed(group);
        group_bytes += static_cast<double>(blob.size());
        insert(put_minute, kT0 + m * 60'000LL + (id - 1) / kGroup, blob);
        group.clear();
      }
    }
    whole.emplace_back(0, 0.0);
    whole_bytes += static_cast<double>(packed(whole).size());
    if (m % 60 == 59) {
      for (int id = 1; id <= n; ++id) {
        const std::string blob = packed(hour[static_cast<std::size_t>(id)]);
        hour_bytes += static_cast<double>(blob.size());
        insert(put_hour, kT0 + (m / 60) * kHourMs + id, blob);
        hour[static_cast<std::size_t>(id)].clear();
      }
    }
    exec(db, "COMMIT");
  }
  sqlite3_finalize(put_minute);
  sqlite3_finalize(put_hour);
  exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
  sqlite3_close(db);

  sqlite3* r = nullptr;
  sqlite3_open_v2(path.c_str(), &r, SQLITE_OPEN_READONLY, nullptr);
  exec(r, "PRAGMA cache_size=-32");
  sqlite3_stmt *get_minute = nullptr, *get_hour = nullptr;
  sqlite3_prepare_v2(r, "SELECT data FROM minutes WHERE ts = ?1", -1, &get_minute, nullptr);
  sqlite3_prepare_v2(r, "SELECT data FROM hours WHERE ts = ?1", -1, &get_hour, nullptr);
  double read_ms[2] = {};
  for (int which = 0; which < 2; ++which) {
    const int id = which == 0 ? 2 : n;
    read_ms[which] = median_ms([&] {
      std::string buf;
      int minutes = 0;
      for (int h = 0; h < 23; ++h)
        read_row(get_hour, kT0 + h * kHourMs + id, buf, [&](std::uint32_t key, double) {
          minutes += key % 5 == 1;  // one of each minute's five
        });
      for (int m = 23 * 60; m < 1440; ++m)
        read_row(get_minute, kT0 + m * 60'000LL + (id - 1) / kGroup, buf,
                 [&](std::uint32_t key, double) {
                   minutes += key / 5 == static_cast<std::uint32_t>(id) && key % 5 == 0;
                 });
      if (minutes != 1440) std::fprintf(stderr, "read %d minutes, not 1440\n", minutes);
    });
  }
  sqlite3_finalize(get_minute);
  sqlite3_finalize(get_hour);
  sqlite3_close(r);
  std::filesystem::remove_all(dir);
  std::printf("| %d | %.0f kB | %.0f kB | %.0f kB (%.0f B a row) | %.2f ms | %.2f ms |\n", n,
              whole_bytes / 24e3, group_bytes / 24e3, hour_bytes / 24e3, hour_bytes / 24 / n,
              read_ms[0], read_ms[1]);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
  if (sizes.empty()) sizes = {80, 393, 1537, 6115};
  std::printf(
      "| series | minute rows of every series, per hour | minute rows of %d series, per hour | "
      "hour rows of one series, per hour | one series, 24 h (23 hour rows + 60 minute rows), "
      "first id | the same, last id |\n|---:|---:|---:|---:|---:|---:|\n",
      kGroup);
  for (int n : sizes)
    if (n >= 2) measure(n);
}
