// The series catalog as its readers see it: every series' name, labels, unit and kind, in id
// order. Part of the store's interface (Store::series()); the writer's side, which assigns ids and
// loads and writes the table, is series_table.hpp.
#pragma once

#include <array>
#include <cstddef>
#include <kiwi/model.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kiwi::agent {

// "core=\"0\",mode=\"user\"" (Prometheus escaping), the canonical label text of a series.
std::string canonical_labels(const std::vector<std::pair<std::string, std::string>>& labels);
void append_canonical_labels(std::string& out,
                             const std::vector<std::pair<std::string, std::string>>& labels);
// Its inverse, for labels read back from the database.
std::vector<std::pair<std::string, std::string>> parse_labels(std::string_view text);

struct SeriesInfo {
  std::string key;
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;
  std::string unit;
  MetricKind kind = MetricKind::gauge;
};

// Metadata of every series, in id order (id = index + 1), as one reader sees it: an immutable
// view of an append-only table. The table is stored in fixed chunks that never move: the writer
// fills the slots past every published size, and publishing a new series makes a new view (a
// size and the chunk list) without copying any series, so adding N series costs O(N) in all
// (a copy of the whole catalog per new series made start-up quadratic: 86 s to first answer with
// 40,000 series). Readers only read slots below their view's size; the writer writes a slot
// before it publishes the view that includes it (under SeriesTable's mutex), so nobody reads a
// slot while it is written.
class SeriesCatalog {
 public:
  static constexpr std::size_t kChunk = 256;
  using Chunk = std::array<SeriesInfo, kChunk>;
  using Chunks = std::vector<std::shared_ptr<Chunk>>;

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const SeriesInfo& operator[](std::size_t i) const {
    return (*(*chunks_)[i / kChunk])[i % kChunk];
  }

  class iterator {
   public:
    iterator(const SeriesCatalog* c, std::size_t i) : c_(c), i_(i) {}
    const SeriesInfo& operator*() const { return (*c_)[i_]; }
    const SeriesInfo* operator->() const { return &(*c_)[i_]; }
    iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator==(const iterator& o) const { return i_ == o.i_; }

   private:
    const SeriesCatalog* c_;
    std::size_t i_;
  };
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, size_}; }

  SeriesCatalog() = default;
  SeriesCatalog(std::shared_ptr<const Chunks> chunks, std::size_t size)
      : chunks_(std::move(chunks)), size_(size) {}

 private:
  std::shared_ptr<const Chunks> chunks_ = std::make_shared<const Chunks>();
  std::size_t size_ = 0;
};

}  // namespace kiwi::agent
