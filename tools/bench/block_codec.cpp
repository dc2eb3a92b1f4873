// Bytes a stored raw tick takes, per block layout (issue 39: flash written <= 1.0 MB/h): reads
// the ticks of a kiwi.db's blocks and its tick log (made by running the agent; it is opened
// read-only), cuts them into blocks of N ticks as a commit every N samples would, and packs each
// in the ticks layout (every block before format 3) and with pack_block() (format 3, by series).
// Prints per N the bytes per tick of each, and the microseconds per tick to pack each and to read
// each (unpack + decode: what a history query does per stored tick), the old layout first; each
// time the least of 7 passes. Built with the tests: build/bin/kiwi-bench-block-codec
// path/to/kiwi.db [N ...] (default 10 60). With --by-name N [SINCE_MS]: where a format-3 block of N
// ticks spends its bytes, by metric name: for each name, the block's bytes per tick less those of
// the same blocks without that name's series (its share), the ticks from SINCE_MS on (an agent's,
// in a file it shares with a fill).
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "store/sample_codec.hpp"
#include "store/tick_log.hpp"

using namespace kiwi::agent;
namespace codec = kiwi::agent::sample_codec;
using Clock = std::chrono::steady_clock;

namespace {

std::vector<codec::Tick> read_ticks(const char* path, std::int64_t since_ms = INT64_MIN) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    std::fprintf(stderr, "%s: %s\n", path, sqlite3_errmsg(db));
    std::exit(1);
  }
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, "SELECT ts, data FROM blocks WHERE ts >= ?1 ORDER BY ts", -1, &st,
                         nullptr) != SQLITE_OK) {
    std::fprintf(stderr, "%s: %s\n", path, sqlite3_errmsg(db));
    std::exit(1);
  }
  sqlite3_bind_int64(st, 1, since_ms);
  std::vector<codec::Tick> ticks;
  std::string buf;
  std::vector<std::pair<std::int64_t, std::string_view>> block;
  auto add = [&](std::string_view data, std::int64_t block_ts) {
    if (!codec::unpack_block(data, block_ts, buf, block)) return;
    for (auto& [ts, blob] : block) {
      if (blob.empty() || blob.front() != codec::kDecodedValues) {
        ticks.emplace_back(ts, std::string(blob));
        continue;
      }
      // A format-3 block's ticks come as decoded values: encoded again (a float32 that is a
      // decimal of up to 4 places comes back as that decimal, a byte or two less than the
      // agent's tag-1 float: the figures of such a file flatter both layouts a little).
      std::vector<std::pair<std::uint32_t, double>> values;
      codec::decode(blob, [&](std::uint32_t id, double v) { values.emplace_back(id, v); });
      std::string encoded;
      codec::encode(encoded, values);
      ticks.emplace_back(ts, std::move(encoded));
    }
  };
  // The blocks table (schema 3-5), then the tick log beside the file (schema 6).
  while (sqlite3_step(st) == SQLITE_ROW)
    add(std::string_view(static_cast<const char*>(sqlite3_column_blob(st, 1)),
                         static_cast<std::size_t>(sqlite3_column_bytes(st, 1))),
        sqlite3_column_int64(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  TickLog(std::string(path) + "-ticks")
      .blocks(since_ms, INT64_MAX, false, [&](const TickLog::Block& b) {
        if (b.ts >= since_ms) add(b.data, b.ts);
        return true;
      });
  return ticks;
}

// The layout of every block before format 3 (pack_block() until then).
std::string pack_ticks_layout(const codec::Tick* first, const codec::Tick* end) {
  std::string raw;
  std::int64_t prev = first->first;
  for (const codec::Tick* t = first; t != end; ++t) {
    codec::put_varint(raw, static_cast<std::uint64_t>(t->first - prev));
    codec::put_varint(raw, t->second.size());
    raw += t->second;
    prev = t->first;
  }
  return codec::pack_if_smaller(std::move(raw));
}

double micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

// Format-3 bytes per tick of `ticks` in blocks of n, keeping the values `keep` says.
template <class Keep>
double bytes_per_tick(const std::vector<codec::Tick>& ticks, std::size_t n, Keep&& keep) {
  std::vector<codec::Tick> kept;
  for (auto& [ts, blob] : ticks) {
    std::vector<std::pair<std::uint32_t, double>> values;
    codec::decode(blob, [&](std::uint32_t id, double v) {
      if (keep(id)) values.emplace_back(id, v);
    });
    std::string encoded;
    codec::encode(encoded, values);
    kept.emplace_back(ts, std::move(encoded));
  }
  std::size_t bytes = 0, counted = 0;
  for (std::size_t at = 0; at + n <= kept.size(); at += n, counted += n)
    bytes += codec::pack_block(kept[at].first, kept.data() + at, kept.data() + at + n).size();
  return counted ? static_cast<double>(bytes) / static_cast<double>(counted) : 0;
}

int by_name(const char* path, std::size_t n, std::int64_t since_ms) {
  const std::vector<codec::Tick> ticks = read_ticks(path, since_ms);
  sqlite3* db = nullptr;
  sqlite3_stmt* st = nullptr;
  std::vector<std::string> names;  // by series id
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK ||
      sqlite3_prepare_v2(db, "SELECT id, name FROM series", -1, &st, nullptr) != SQLITE_OK) {
    std::fprintf(stderr, "%s: %s\n", path, sqlite3_errmsg(db));
    return 1;
  }
  while (sqlite3_step(st) == SQLITE_ROW) {
    const auto id = static_cast<std::size_t>(sqlite3_column_int64(st, 0));
    if (names.size() <= id) names.resize(id + 1);
    names[id] = reinterpret_cast<const char*>(sqlite3_column_text(st, 1));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  auto name_of = [&](std::uint32_t id) { return id < names.size() ? names[id] : std::string(); };
  std::vector<std::string> seen;
  for (auto& [ts, blob] : ticks)
    codec::decode(blob, [&](std::uint32_t id, double) { seen.push_back(name_of(id)); });
  std::sort(seen.begin(), seen.end());
  std::vector<std::pair<std::string, std::size_t>> counts;  // name, values in the ticks
  for (std::size_t i = 0, j; i < seen.size(); i = j) {
    for (j = i; j < seen.size() && seen[j] == seen[i];) ++j;
    counts.emplace_back(seen[i], j - i);
  }
  const double all = bytes_per_tick(ticks, n, [](std::uint32_t) { return true; });
  std::printf("%zu ticks in blocks of %zu: %.1f B a tick\n", ticks.size(), n, all);
  std::vector<std::pair<double, std::string>> shares;
  for (auto& [name, values] : counts) {
    const double without =
        bytes_per_tick(ticks, n, [&](std::uint32_t id) { return name_of(id) != name; });
    shares.emplace_back(all - without, name + " (" +
                                           std::to_string(static_cast<double>(values) /
                                                          static_cast<double>(ticks.size())) +
                                           " values a tick)");
  }
  std::sort(shares.rbegin(), shares.rend());
  for (auto& [share, what] : shares) std::printf("%7.2f B  %s\n", share, what.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(
        stderr,
        "usage: %s kiwi.db [ticks per block ...]\n       %s kiwi.db --by-name N [SINCE_MS]\n",
        argv[0], argv[0]);
    return 2;
  }
  if (argc >= 4 && std::string(argv[2]) == "--by-name")
    return by_name(argv[1], static_cast<std::size_t>(std::atol(argv[3])),
                   argc >= 5 ? std::atoll(argv[4]) : INT64_MIN);
  const std::vector<codec::Tick> ticks = read_ticks(argv[1]);
  std::size_t values = 0;
  if (!ticks.empty()) codec::decode(ticks.back().second, [&](auto, auto) { ++values; });
  std::printf("%zu ticks, %zu values in the last\n", ticks.size(), values);
  std::vector<int> sizes;
  for (int i = 2; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
  if (sizes.empty()) sizes = {10, 60};
  std::printf("%6s %7s %10s %10s %7s %8s %8s %8s %8s\n", "ticks", "blocks", "old B/tick",
              "new B/tick", "new/old", "pack us", "new", "read us", "new");
  for (int n : sizes) {
    // Times per block: the least of kPasses passes over the file (the machine is shared).
    constexpr int kPasses = 7;
    std::size_t blocks = 0, counted = 0, old_bytes = 0, new_bytes = 0;
    double old_pack = 0, new_pack = 0, old_read = 0, new_read = 0;
    std::string buf;
    std::vector<std::pair<std::int64_t, std::string_view>> back;
    double sum = 0;
    const auto least = [](auto&& step) {
      double best = 1e300;
      for (int pass = 0; pass < kPasses; ++pass) {
        const auto start = Clock::now();
        step();
        best = std::min(best, micros(Clock::now() - start));
      }
      return best;
    };
    for (std::size_t at = 0; at + static_cast<std::size_t>(n) <= ticks.size(); at += n) {
      const codec::Tick* first = ticks.data() + at;
      const std::string old_block = pack_ticks_layout(first, first + n);
      const std::string block = codec::pack_block(first->first, first, first + n);
      if (!codec::unpack_block(block, first->first, buf, back)) {
        std::fprintf(stderr, "block at %zu does not read back\n", at);
        return 1;
      }
      old_pack +=
          least([&] { sum += static_cast<double>(pack_ticks_layout(first, first + n).size()); });
      new_pack += least([&] {
        sum += static_cast<double>(codec::pack_block(first->first, first, first + n).size());
      });
      const auto read = [&](const std::string& stored) {
        codec::unpack_block(stored, first->first, buf, back);
        for (auto& tick : back) codec::decode(tick.second, [&](auto, double v) { sum += v; });
      };
      old_read += least([&] { read(old_block); });
      new_read += least([&] { read(block); });
      old_bytes += old_block.size();
      new_bytes += block.size();
      counted += static_cast<std::size_t>(n);
      ++blocks;
    }
    if (counted == 0) continue;
    const double c = static_cast<double>(counted);
    std::printf("%6d %7zu %10.1f %10.1f %7.2f %8.1f %8.1f %8.1f %8.1f\n", n, blocks,
                static_cast<double>(old_bytes) / c, static_cast<double>(new_bytes) / c,
                static_cast<double>(new_bytes) / static_cast<double>(old_bytes), old_pack / c,
                new_pack / c, old_read / c, new_read / c);
    if (sum == 0.125) std::puts("");  // the values are used: the work is not optimised away
  }
  return 0;
}
