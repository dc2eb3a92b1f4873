// The query side: Store::query() over the committed history (through the read pool), the ticks
// still queued and the minute the writer is summarising now.
#pragma once

#include <atomic>
#include <cstdint>
#include <kiwi/model.hpp>

#include "store/minute_board.hpp"
#include "store/queue.hpp"
#include "store/reader.hpp"
#include "store/series_table.hpp"
#include "store/store.hpp"

namespace kiwi::agent {

// What a query reads. `open_minute`: the minute summarised in memory now (INT64_MAX: none); a
// stored rollup row of it is partial (written before a restart), so its samples are read instead.
// `board`: the closed minutes not in the file yet.
struct QuerySources {
  ReadPool& pool;
  const TickQueue& queue;
  const SeriesTable& series;
  const std::atomic<std::int64_t>& open_minute;
  const MinuteBoard& board;
};

// Store::query() (store.hpp). Throws StoreError.
HistoryResult run_query(const QuerySources& src, const HistoryQuery& q);

}  // namespace kiwi::agent
