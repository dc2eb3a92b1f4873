#include "metrics_render.hpp"

#include <charconv>
#include <cmath>
#include <concepts>
#include <deque>
#include <kiwi/prometheus.hpp>
#include <unordered_map>

namespace kiwi_metrics {

namespace {

// The exposition format's escaping (kiwi/prometheus.hpp): label values \\, \" and \n; HELP text
// \\ and \n (it keeps its quotes).
using kiwi::prometheus::append_escaped_help;
using kiwi::prometheus::append_escaped_label_value;

// Rendered once per sample (each scrape after a tick renders it afresh), so it is built for few
// allocations: one text that holds every series' labels, one string per family, lookups on
// views and hashes.
struct Series {
  std::size_t labels_at, labels_size;  // `{a="b"}` or "" in Families::labels_
  double value;
  std::uint8_t part;  // a histogram's or summary's series: kParts[part] after the family's name
};

// What a histogram's or summary's series adds to its family's name (kiwi/prometheus.hpp).
constexpr std::string_view kParts[] = {"", "_bucket", "_sum", "_count"};
std::uint8_t part_code(std::string_view suffix) {
  for (std::uint8_t i = 0; i < std::size(kParts); ++i)
    if (kParts[i] == suffix) return i;
  return 0;
}

// A set of hashes without a node per element (a series each, every render): open addressing,
// linear probing, at most half full.
class HashSet {
 public:
  // False when `h` was in it already.
  bool insert(std::size_t h) {
    h |= 1;  // 0 marks a free slot
    if (2 * (size_ + 1) > slots_.size()) grow();
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = h & mask;; i = (i + 1) & mask) {
      if (slots_[i] == h) return false;
      if (slots_[i] == 0) {
        slots_[i] = h;
        ++size_;
        return true;
      }
    }
  }

 private:
  void grow() {
    std::vector<std::size_t> old(std::max<std::size_t>(256, 2 * slots_.size()), 0);
    old.swap(slots_);
    size_ = 0;
    for (std::size_t h : old)
      if (h) insert(h);
  }
  std::vector<std::size_t> slots_;  // a power of two long
  std::size_t size_ = 0;
};

struct Family {
  std::string name;  // full exposed name
  std::string help;  // escaped
  kiwi::MetricKind kind = kiwi::MetricKind::gauge;
  std::vector<Series> series;
};

class Families {
 public:
  // The family `name`; `help` is called for a new one only.
  template <std::invocable Help>
  Family& get(std::string_view name, Help&& help, kiwi::MetricKind kind) {
    if (auto it = index_.find(name); it != index_.end()) return families_[it->second];
    Family& f = families_.emplace_back();
    f.name = name;
    append_escaped_help(f.help, help());
    f.kind = kind;
    index_.emplace(f.name, families_.size() - 1);  // a view of the deque's copy
    return f;
  }
  Family& get(std::string_view name, std::string_view help, kiwi::MetricKind kind) {
    return get(
        name, [&] { return help; }, kind);
  }
  // The label text of the next add() is written here, then add() takes it.
  std::string& labels() { return labels_; }
  // A series of `f` (its part, for a histogram or summary) with the labels written to labels()
  // since the last add(); a repeat of a series `f` has already is dropped.
  void add(Family& f, double value, std::uint8_t part = 0) {
    const std::size_t at = pending_;
    const std::string_view text = std::string_view(labels_).substr(at);
    pending_ = labels_.size();
    const std::size_t h = std::hash<std::string_view>()(text) ^
                          reinterpret_cast<std::uintptr_t>(&f) ^ (part * 0x9e3779b97f4a7c15ull);
    if (!seen_.insert(h))  // the same hash: a duplicate, or (rarely) another series
      for (auto& s : f.series)
        if (s.part == part &&
            std::string_view(labels_).substr(s.labels_at, s.labels_size) == text) {
          labels_.resize(at);
          pending_ = at;
          return;
        }
    f.series.push_back({at, text.size(), value, part});
  }
  void add(Family& f, std::string_view labels, double value) {
    labels_ += labels;
    add(f, value);
  }
  std::string_view labels_of(const Series& s) const {
    return std::string_view(labels_).substr(s.labels_at, s.labels_size);
  }
  const std::deque<Family>& all() const { return families_; }

 private:
  std::deque<Family> families_;  // a deque: its elements never move, so views of names stay valid
  std::unordered_map<std::string_view, std::size_t> index_;
  HashSet seen_;             // hashes of (family, label text)
  std::string labels_;       // every series' label text, one after another
  std::size_t pending_ = 0;  // where the next series' labels start
};

void append_labels(std::string& out,
                   const std::vector<std::pair<std::string, std::string>>& labels) {
  if (labels.empty()) return;
  out += '{';
  bool first = true;
  for (auto& [k, v] : labels) {
    if (!first) out += ',';
    first = false;
    out += k;
    out += "=\"";
    append_escaped_label_value(out, v);
    out += '"';
  }
  out += '}';
}

const kiwi::MetricSpec* find_spec(const kiwi::AgentStats& stats, std::string_view plugin,
                                  std::string_view name) {
  for (auto& p : stats.plugins)
    if (p.plugin == plugin)
      for (auto& m : p.metrics)
        if (m.name == name) return &m;
  return nullptr;
}

void append_value(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else {
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
  }
}

}  // namespace

std::string escape_label_value(std::string_view v) {
  return kiwi::prometheus::escape_label_value(v);
}

std::string escape_help(std::string_view v) {
  return kiwi::prometheus::escape_help(v);
}

std::string format_value(double v) {
  std::string out;
  append_value(out, v);
  return out;
}

std::string render(const kiwi::Snapshot& snap, const kiwi::AgentStats& stats) {
  Families fams;
  std::string name;  // reused: no allocation per metric for the lookup
  for (auto& sensor : snap.sensors)
    for (auto& m : sensor.metrics) {
      name.clear();
      std::string_view family = m.name;  // as a fallback HELP names it
      std::uint8_t part = 0;
      if (m.kind == kiwi::MetricKind::histogram || m.kind == kiwi::MetricKind::summary) {
        // One family of its series (the agent's metric check made sure the name fits).
        const bool histogram = m.kind == kiwi::MetricKind::histogram;
        if (const auto fp = kiwi::prometheus::family_part_of(m.name, histogram, m.labels)) {
          family = fp->family;
          part = part_code(fp->suffix);
        }
        name.append("kiwi_").append(family);
      } else {
        kiwi::prometheus::append_exposed_name(name, m.name, m.kind == kiwi::MetricKind::counter);
      }
      auto help = [&] {
        const kiwi::MetricSpec* spec = find_spec(stats, sensor.plugin, m.name);
        if (spec) return std::string(spec->help);
        for (auto& [name, text] : sensor.help)  // a family the sensor made: its program's HELP
          if (name == family) return text;
        // A histogram's or summary's unit is its observations' (its _sum has it): none named.
        const bool unit = !m.unit.empty() && (m.kind == kiwi::MetricKind::gauge ||
                                              m.kind == kiwi::MetricKind::counter);
        return std::string(family) + " from sensor plugin " + sensor.plugin +
               (unit ? " (" + m.unit + ")" : "");
      };
      Family& f = fams.get(name, help, m.kind);
      append_labels(fams.labels(), m.labels);
      fams.add(f, m.value, part);
    }

  std::size_t size = 0;
  for (auto& f : fams.all()) {
    size += 2 * f.name.size() + f.help.size() + 24;
    for (auto& s : f.series) size += f.name.size() + s.labels_size + 26;
  }
  std::string out;
  out.reserve(size);
  for (auto& f : fams.all()) {
    if (f.series.empty()) continue;
    out.append("# HELP ").append(f.name).append(" ").append(f.help).append("\n");
    out.append("# TYPE ").append(f.name).append(" ").append(to_string(f.kind)).append("\n");
    for (auto& s : f.series) {
      out.append(f.name).append(kParts[s.part]).append(fams.labels_of(s)).append(" ");
      append_value(out, s.value);
      out += '\n';
    }
  }
  return out;
}

}  // namespace kiwi_metrics
