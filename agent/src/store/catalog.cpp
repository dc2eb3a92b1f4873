#include "store/catalog.hpp"

#include <algorithm>
#include <string_view>

#include "store/sample_codec.hpp"
#include "store/schema.hpp"
#include "store/series_table.hpp"

namespace kiwi::agent {

namespace {
void append_escaped_label(std::string& out, std::string_view v) {
  for (char c : v) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
}

// A series' key: `name`, or `name{labels}` with its canonical label text. Written into `out`, so
// the per-tick lookup reuses one buffer.
void assign_key(std::string& out, std::string_view name, std::string_view labels) {
  out.assign(name);
  if (labels.empty()) return;
  out.push_back('{');
  out.append(labels);
  out.push_back('}');
}
}  // namespace

std::vector<std::pair<std::string, std::string>> parse_labels(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!text.empty()) {
    auto eq = text.find("=\"");
    if (eq == std::string_view::npos) break;
    std::string name(text.substr(0, eq)), value;
    std::size_t i = eq + 2;
    for (; i < text.size() && text[i] != '"'; ++i) {
      if (text[i] == '\\' && i + 1 < text.size()) {
        ++i;
        value.push_back(text[i] == 'n' ? '\n' : text[i]);
      } else {
        value.push_back(text[i]);
      }
    }
    out.emplace_back(std::move(name), std::move(value));
    text.remove_prefix(std::min(text.size(), i + 2));  // past `",`
  }
  return out;
}

void append_canonical_labels(std::string& out,
                             const std::vector<std::pair<std::string, std::string>>& labels) {
  bool first = true;
  for (auto& [k, v] : labels) {
    if (!first) out.push_back(',');
    first = false;
    out += k;
    out += "=\"";
    append_escaped_label(out, v);
    out.push_back('"');
  }
}

std::string canonical_labels(const std::vector<std::pair<std::string, std::string>>& labels) {
  std::string out;
  append_canonical_labels(out, labels);
  return out;
}

void SeriesTable::ids(const std::vector<const MetricValue*>& metrics,
                      std::vector<std::pair<std::uint32_t, double>>& values) {
  values.reserve(metrics.size());
  recent_ids_.resize(metrics.size());
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    recent_ids_[i] = id(*metrics[i], i);
    values.emplace_back(recent_ids_[i], metrics[i]->value);
  }
}

// Ids are assigned in memory (contiguous, as loaded) and the series rows written by flush().
// Called for every metric of every tick: the lookup builds its key in a reused buffer.
std::uint32_t SeriesTable::id(const MetricValue& m, std::size_t position) {
  if (position < recent_ids_.size()) {
    const std::uint32_t id = recent_ids_[position];
    if (id >= 1 && id <= count_) {
      const std::size_t i = id - 1, n = SeriesCatalog::kChunk;
      const SeriesInfo& s = (*(*chunks_)[i / n])[i % n];
      if (s.name == m.name && s.labels == m.labels) return id;
    }
  }
  labels_buf_.clear();
  append_canonical_labels(labels_buf_, m.labels);
  assign_key(key_buf_, m.name, labels_buf_);
  if (auto it = ids_.find(key_buf_); it != ids_.end()) return it->second;
  const std::uint32_t id = add({key_buf_, m.name, m.labels, m.unit, m.kind});
  publish();
  return id;
}

std::uint32_t SeriesTable::add(SeriesInfo s) {
  constexpr std::size_t n = SeriesCatalog::kChunk;
  if (count_ == chunks_->size() * n) {
    // A new chunk: a new list (published views keep the old one, which nobody changes).
    auto next = std::make_shared<SeriesCatalog::Chunks>(*chunks_);
    next->push_back(std::make_shared<SeriesCatalog::Chunk>());
    chunks_ = std::move(next);
  }
  const auto id = static_cast<std::uint32_t>(count_ + 1);
  ids_.emplace(s.key, id);
  (*(*chunks_)[count_ / n])[count_ % n] = std::move(s);  // past every view's size
  ++count_;
  return id;
}

void SeriesTable::publish() {
  auto view = std::make_shared<const SeriesCatalog>(chunks_, count_);
  std::lock_guard lock(mutex_);
  view_ = std::move(view);
}

SeriesTable::View SeriesTable::view() const {
  std::lock_guard lock(mutex_);
  return view_;
}

std::string SeriesTable::carry(std::size_t from) const {
  using sample_codec::put_varint;
  std::string out;
  put_varint(out, count_);
  put_varint(out, from);
  auto put_text = [&](std::string_view t) {
    put_varint(out, t.size());
    out += t;
  };
  std::string labels;
  for (std::size_t i = from; i < count_; ++i) {
    const SeriesInfo& s = (*(*chunks_)[i / SeriesCatalog::kChunk])[i % SeriesCatalog::kChunk];
    put_text(s.name);
    labels.clear();
    append_canonical_labels(labels, s.labels);
    put_text(labels);
    put_text(s.unit);
    out.push_back(static_cast<char>(s.kind));
  }
  return out;
}

std::size_t SeriesTable::adopt(std::string_view in) {
  using sample_codec::get_varint;
  std::uint64_t end = 0, from = 0;
  if (!get_varint(in, end) || !get_varint(in, from) || from > count_ || end < from) return 0;
  auto get_text = [&](std::string_view& t) {
    std::uint64_t n = 0;
    if (!get_varint(in, n) || n > in.size()) return false;
    t = in.substr(0, n);
    in.remove_prefix(n);
    return true;
  };
  std::vector<SeriesInfo> rows;
  for (std::uint64_t id = from + 1; id <= end; ++id) {
    std::string_view name, labels, unit;
    if (!get_text(name) || !get_text(labels) || !get_text(unit) || in.empty()) return 0;
    const auto kind = static_cast<unsigned char>(in.front());
    in.remove_prefix(1);
    if (id <= count_) continue;
    SeriesInfo s{{},
                 std::string(name),
                 parse_labels(labels),
                 std::string(unit),
                 static_cast<MetricKind>(kind)};
    assign_key(s.key, s.name, labels);
    rows.push_back(std::move(s));
  }
  if (!in.empty()) return 0;
  for (auto& s : rows) add(std::move(s));
  if (!rows.empty()) publish();
  return rows.size();
}

// A file that turned out malformed while its series were read: none of them count.
void SeriesTable::forget() {
  ids_.clear();
  recent_ids_.clear();
  chunks_ = std::make_shared<SeriesCatalog::Chunks>();
  count_ = 0;
  publish();
}

void SeriesTable::load(sql::Connection& db) {
  sql::Statement st;
  if (st.prepare(db, "SELECT id, name, labels, unit, kind FROM series ORDER BY id", false) !=
      sql::kOk)
    throw db.error("cannot read series");
  auto rows = st.query();
  while (rows.next()) {
    auto id = static_cast<std::uint32_t>(rows.int64(0));
    SeriesInfo s;
    s.name = rows.text(1);
    const std::string_view labels = rows.text(2);
    s.labels = parse_labels(labels);
    s.unit = rows.text(3);
    s.kind = static_cast<MetricKind>(rows.int32(4));
    assign_key(s.key, s.name, labels);
    if (id != count_ + 1)
      throw Malformed(db.path() + ": series ids are not contiguous; the database is damaged");
    add(std::move(s));
  }
  if (rows.code() != sql::kDone) throw db.error("cannot read series");
  publish();
}

}  // namespace kiwi::agent
