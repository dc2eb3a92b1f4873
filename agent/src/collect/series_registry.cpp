#include "collect/series_registry.hpp"

#include <algorithm>
#include <kiwi/prometheus.hpp>

namespace kiwi::agent {

namespace {

// FNV-1a. A collision (2^-64 per pair) would refuse a series wrongly or let one through; no
// allocation per metric per tick.
struct Fnv {
  std::uint64_t h = 1469598103934665603ull;
  Fnv& bytes(std::string_view s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return *this;
  }
  // `s` and a separator no UTF-8 text holds, so that "ab","c" and "a","bc" differ.
  Fnv& add(std::string_view s) {
    bytes(s);
    h = (h ^ 0xff) * 1099511628211ull;
    return *this;
  }
};

// The exposed family's hash: the name as /metrics shows it (the prefix is the same for all); a
// histogram's or summary's series counts in its family's name (foo_bucket, foo_sum: foo).
std::uint64_t family_hash(std::string_view name, MetricKind kind, bool has_part_label = false) {
  Fnv f;
  if (kind == MetricKind::histogram || kind == MetricKind::summary) {
    const bool histogram = kind == MetricKind::histogram;
    const auto part = prometheus::family_part(name, histogram, has_part_label);
    return f.bytes(part ? part->family : name).h;
  }
  f.bytes(name);
  if (prometheus::exposed_with_total(name, kind == MetricKind::counter)) f.bytes("_total");
  return f.h;
}
std::uint64_t family_hash(const MetricValue& m) {
  if (m.kind != MetricKind::histogram && m.kind != MetricKind::summary)
    return family_hash(m.name, m.kind);
  const auto part = prometheus::family_part_of(m.name, m.kind == MetricKind::histogram, m.labels);
  return Fnv().bytes(part ? part->family : std::string_view(m.name)).h;
}

// A series: its family, its labels as a set (the sum of each pair's hash, mixed: the order a
// sensor writes them in does not matter, as it does not to Prometheus), and in a histogram or
// summary its name (the family's _sum and _count differ by it alone; a counter's foo and
// foo_total are one exposed series).
std::uint64_t series_hash(std::uint64_t family, const MetricValue& m) {
  const bool parts = m.kind == MetricKind::histogram || m.kind == MetricKind::summary;
  std::uint64_t sum = parts ? Fnv().add(m.name).h : 0;
  for (auto& [k, v] : m.labels) {
    std::uint64_t x = Fnv().add(k).add(v).h;
    x ^= x >> 33;  // splitmix64's finaliser: pairs' hashes sum without cancelling
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    sum += x;
  }
  return family ^ (sum * 0x9e3779b97f4a7c15ull + m.labels.size());
}

}  // namespace

SeriesRegistry::Owner SeriesRegistry::owner(std::string_view name) {
  auto it = std::find(names_.begin(), names_.end(), name);
  if (it != names_.end()) return static_cast<Owner>(it - names_.begin());
  names_.emplace_back(name);
  counts_.push_back(0);
  return static_cast<Owner>(names_.size() - 1);
}

void SeriesRegistry::reserve(Owner o, std::span<const MetricSpec> families) {
  for (auto& spec : families) {
    // A row names one series: a histogram's bucket row (name_bucket) has the label le, a
    // summary's quantile row (its family's own name) the label quantile.
    const bool part_label = spec.kind == MetricKind::histogram
                                ? spec.name.ends_with("_bucket")
                                : !spec.name.ends_with("_sum") && !spec.name.ends_with("_count");
    Family& f = families_[family_hash(spec.name, spec.kind, part_label)];
    f = {spec.kind, o, true, f.series};
  }
}

SeriesRegistry::Verdict SeriesRegistry::claim(Owner o, const MetricValue& m) {
  const std::uint64_t fam = family_hash(m);
  auto f = families_.find(fam);
  if (f != families_.end()) {
    if (f->second.reserved && f->second.owner != o) return {Refusal::reserved, f->second.owner};
    if (f->second.kind != m.kind) return {Refusal::kind, 0, f->second.kind};
  }
  if (f == families_.end())
    if (const auto other = clashing_kind(m)) return {Refusal::kind, 0, *other};
  const std::uint64_t key = series_hash(fam, m);
  if (auto s = series_.find(key); s != series_.end())
    return s->second.owner == o ? Verdict{} : Verdict{Refusal::owned, s->second.owner};
  if (counts_[o] >= limit_) return {Refusal::limit};
  series_.emplace(key, Series{o, fam});
  ++counts_[o];
  if (f == families_.end()) f = families_.emplace(fam, Family{m.kind, o, false, 0}).first;
  ++f->second.series;
  return {};
}

std::optional<MetricKind> SeriesRegistry::clashing_kind(const MetricValue& m) const {
  auto kind_of = [&](std::string_view exposed) -> std::optional<MetricKind> {
    const auto it = families_.find(Fnv().bytes(exposed).h);
    return it == families_.end() ? std::nullopt : std::optional<MetricKind>(it->second.kind);
  };
  static constexpr std::string_view kSuffixes[] = {"_bucket", "_sum", "_count"};
  if (m.kind == MetricKind::gauge) {
    // A gauge x_sum beside a histogram or summary x: /metrics would show kiwi_x_sum twice.
    for (std::string_view suffix : kSuffixes) {
      if (!std::string_view(m.name).ends_with(suffix)) continue;
      const auto k = kind_of(std::string_view(m.name).substr(0, m.name.size() - suffix.size()));
      if (k == MetricKind::histogram || (k == MetricKind::summary && suffix != "_bucket")) return k;
    }
  } else if (m.kind == MetricKind::histogram || m.kind == MetricKind::summary) {
    // And the other way round: a histogram or summary x beside a gauge x_sum.
    const bool histogram = m.kind == MetricKind::histogram;
    const auto part = prometheus::family_part_of(m.name, histogram, m.labels);
    if (!part) return std::nullopt;
    std::string name(part->family);
    for (std::string_view suffix : kSuffixes) {
      if (!histogram && suffix == "_bucket") continue;
      name.resize(part->family.size());
      name += suffix;
      if (const auto k = kind_of(name); k == MetricKind::gauge) return k;
    }
  }
  return std::nullopt;
}

void SeriesRegistry::release(Owner o) {
  std::erase_if(series_, [&](auto& s) {
    if (s.second.owner != o) return false;
    auto f = families_.find(s.second.family);
    if (f != families_.end() && --f->second.series == 0 && !f->second.reserved) families_.erase(f);
    return true;
  });
  counts_[o] = 0;
}

}  // namespace kiwi::agent
