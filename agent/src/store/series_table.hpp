// The writer's side of the series catalog: assigns ids to the series of each tick (in memory,
// contiguous, as loaded), publishes the readers' view (catalog.hpp), and loads the table from the
// file at open. The rows of new series are written by the writer's commit at the hour's fold; until
// then each tick log record carries them (carry(), adopt()), so a tick never names a series that
// neither the file nor the log's newest carrying record has.
#pragma once

#include <cstdint>
#include <kiwi/model.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "store/catalog.hpp"
#include "store/sqlite.hpp"

namespace kiwi::agent {

class SeriesTable {
 public:
  using View = std::shared_ptr<const SeriesCatalog>;

  // Writer thread. The (id, value) of each metric of one tick, into `values` (appended): a new
  // series is added to the catalog and published at once.
  void ids(const std::vector<const MetricValue*>& metrics,
           std::vector<std::pair<std::uint32_t, double>>& values);
  // Reads the series table of `db` (at open): StoreError with SQLite's message, Malformed for
  // ids that are not contiguous. Publishes the catalog read.
  void load(sql::Connection& db);
  // The rows of series [from, size()) as a tick log record carries them (TickLog::append()):
  // varint(size()), varint(from), then per series varint-prefixed name, canonical labels and
  // unit, and its kind as a byte. The first varint only rises from record to record, as
  // TickLog::carried() needs.
  std::string carry(std::size_t from) const;
  // Adds the series of `carried` (carry()'s bytes) that are past size(), and publishes them;
  // returns how many. 0 for rows that do not continue the table (a gap) or do not decode.
  std::size_t adopt(std::string_view carried);
  // Forgets every series (a file that turned out malformed while its series were read).
  void forget();
  std::size_t size() const { return count_; }  // series in the writer's table

  // Any thread: the catalog as published last, immutable (readers share it without copying).
  View view() const;

 private:
  // The id of m's series (added to the catalogue if new). `position` is m's index in this tick's
  // list: the series at that index last tick is tried first (see recent_ids_).
  std::uint32_t id(const MetricValue& m, std::size_t position);
  std::uint32_t add(SeriesInfo s);  // appends to the writer's table, returns its id
  void publish();                   // makes the writer's table the readers' catalog

  // Series catalog: written by the writer, read by every worker (mutex_ guards the pointer only).
  // Thread safety (the TSan report of issue 16 pairing series_id() with series()): every read
  // and write of view_ takes mutex_; a view is immutable once published, and the one thing the
  // writer changes after that, a chunk slot, lies past the size of every view published so far,
  // and is written before the view that includes it is published under that same mutex
  // (happens-before for every reader that gets the view). Views die on whichever thread drops
  // the last shared_ptr, through its atomic count. So no two threads touch one object unordered;
  // a report here is the libstdc++ 12 shared_ptr / atomic<shared_ptr> false positive
  // (google/sanitizers#1558), which the TSan run suppresses by that name only. The writer's table
  // (chunks_, count_), ids_ and the two buffers belong to the writer thread.
  mutable std::mutex mutex_;
  View view_ = std::make_shared<const SeriesCatalog>();  // index = id - 1
  std::shared_ptr<SeriesCatalog::Chunks> chunks_ = std::make_shared<SeriesCatalog::Chunks>();
  std::size_t count_ = 0;
  std::unordered_map<std::string, std::uint32_t> ids_;  // key -> id
  // id()'s label text and lookup key, reused: no allocation per metric per tick.
  std::string labels_buf_, key_buf_;
  // The ids of the last tick's series, by position. Sensors emit in the same order every tick,
  // so the series at a position is nearly always the one there last tick: comparing its name and
  // labels spares building and hashing the key (most of append()'s cost). 0: none.
  std::vector<std::uint32_t> recent_ids_;
};

}  // namespace kiwi::agent
