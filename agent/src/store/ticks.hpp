// Reading ticks from the three places they are kept: the tick log (a block per commit, schema 6
// on; tick_log.hpp), the blocks table (a row per commit, schema 3-5) and the tick rows of an older
// agent's file (both read until retention prunes them). The writer reads a
// minute's ticks with these (Writer::begin_minute), the readers every window.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "store/millis.hpp"
#include "store/sample_codec.hpp"
#include "store/sqlite.hpp"
#include "store/tick_log.hpp"

namespace kiwi::agent {

// The statements that read ticks, prepared on one connection, and the tick log beside its file.
struct TickStatements {
  const TickLog* log = nullptr;
  sql::Statement blocks_up;    // ?1 <= ts <= ?2 and last >= ?3: ts, data; oldest first
  sql::Statement blocks_down;  // the same, newest first
  sql::Statement rows_up;      // samples with ?1 <= ts <= ?2: ts, data; oldest first
  sql::Statement rows_down;    // the same, newest first
  int prepare(sql::Connection& db, const TickLog& ticks);  // an SQLite result code
};

// Calls fn(ts, blob) for every tick stored with from <= ts <= to, oldest first (newest first when
// `newest_first`), each ts once, until fn returns false: the tick rows of an older agent, then the
// blocks table, then the tick log (ticks only ever go forward in time, so the rows are older), or
// the other way round.
// Blobs are views valid until fn returns. A block that does not unpack reads as missing, as a
// damaged tick row did. The same ts twice (two blocks overlap when the wall clock went back
// between two runs) is read once, the first met. Throws StoreError.
template <class Fn>
void scan_ticks(const sql::Connection& db, TickStatements& t, std::int64_t from, std::int64_t to,
                bool newest_first, Fn&& fn) {
  if (from > to) return;
  std::int64_t seen = newest_first ? INT64_MAX : INT64_MIN;
  bool go = true;
  auto emit = [&](std::int64_t ts, std::string_view blob) {
    if (ts < from || ts > to || (newest_first ? ts >= seen : ts <= seen)) return;
    seen = ts;
    go = fn(ts, blob);
  };
  std::string buf;
  std::vector<std::pair<std::int64_t, std::string_view>> ticks;
  auto unpack = [&](std::string_view block, std::int64_t ts) {
    if (!sample_codec::unpack_block(block, ts, buf, ticks)) return;
    if (newest_first)
      for (auto it = ticks.rbegin(); go && it != ticks.rend(); ++it) emit(it->first, it->second);
    else
      for (auto it = ticks.begin(); go && it != ticks.end(); ++it) emit(it->first, it->second);
  };
  auto logged = [&] {
    if (t.log)
      t.log->blocks(from, to, newest_first, [&](const TickLog::Block& b) {
        unpack(b.data, b.ts);
        return go;
      });
  };
  auto run = [&](sql::Statement& st, bool blocks) {
    auto rows =
        blocks ? st.query(minus_saturating(from, kMaxBlockSpanMs), to, from) : st.query(from, to);
    while (go && rows.next()) {
      const std::int64_t ts = rows.int64(0);
      if (!blocks) {
        emit(ts, rows.blob(1));
        continue;
      }
      unpack(rows.blob(1), ts);
    }
    if (rows.failed()) throw db.error("cannot read history");
  };
  if (newest_first) {
    logged();
    if (go) run(t.blocks_down, true);
    if (go) run(t.rows_down, false);
  } else {
    run(t.rows_up, false);
    if (go) run(t.blocks_up, true);
    if (go) logged();
  }
}

}  // namespace kiwi::agent
