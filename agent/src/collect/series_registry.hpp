// Which report owns which series (collector thread only). Every output shares one namespace: a
// series is a family as /metrics exposes it (the metric's name, with "_total" for a counter)
// with a set of labels (in any order), and /metrics, /api/current and the history each keep one
// value of it per sample. So a series belongs to the first report that had a value of it stored
// this run, and its values from any other report are refused (docs/plugins.md, "Series
// identity"): two sensors never merge into one series, and a sensor cannot replace another's.
// The families of the agent's own report are reserved to it from the start, whatever their
// labels. A family has one kind: a value whose kind differs from its family's is refused. And a
// report owns at most `limit` series (collector.max_series_per_sensor).
#pragma once

#include <cstdint>
#include <kiwi/model.hpp>
#include <kiwi/plugin.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kiwi::agent {

class SeriesRegistry {
 public:
  using Owner = std::uint32_t;

  enum class Refusal {
    none,      // stored: the report's own series, or a new one it now owns
    limit,     // a new series past the report's limit
    owned,     // another report's series
    reserved,  // a family of the agent's own report
    kind,      // its family is of another kind
  };
  struct Verdict {
    Refusal refusal = Refusal::none;
    Owner other = 0;                      // owned, reserved: whose series or family
    MetricKind kind = MetricKind::gauge;  // kind: the family's
    bool stored() const { return refusal == Refusal::none; }
  };

  explicit SeriesRegistry(std::size_t limit = 0) : limit_(limit) {}

  // The series a report may own from now on (those it owns stay its own).
  void set_limit(std::size_t limit) { limit_ = limit; }
  std::size_t limit() const { return limit_; }
  // The report called `name`: the same Owner for the same name as long as the registry lives.
  Owner owner(std::string_view name);
  const std::string& name_of(Owner o) const { return names_[o]; }
  // Reserves `families` (MetricSpec rows) to `o`: a value of any of them from another report is
  // refused.
  void reserve(Owner o, std::span<const MetricSpec> families);
  // Whether `o` may store `m`; a new series it may store is its own from now on.
  Verdict claim(Owner o, const MetricValue& m);
  // `o`'s series and families are free again (a sensor no longer configured).
  void release(Owner o);
  std::size_t owned_by(Owner o) const { return o < counts_.size() ? counts_[o] : 0; }

 private:
  // The kind of a family /metrics would show beside `m`'s under one of its series' names: a
  // gauge x_sum and a histogram x. nullopt when there is none.
  std::optional<MetricKind> clashing_kind(const MetricValue& m) const;

  struct Family {
    MetricKind kind;
    Owner owner;         // reserved: whose
    bool reserved;       // kept while the registry lives
    std::size_t series;  // stored series of it; a family with none is forgotten
  };
  struct Series {
    Owner owner;
    std::uint64_t family;
  };
  std::size_t limit_;
  std::vector<std::string> names_;
  std::vector<std::size_t> counts_;  // series owned, by Owner
  std::unordered_map<std::uint64_t, Family> families_;
  std::unordered_map<std::uint64_t, Series> series_;
};

}  // namespace kiwi::agent
