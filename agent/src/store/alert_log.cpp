#include "store/alert_log.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

#include "store/catalog.hpp"

namespace kiwi::agent {

namespace {

// Fields in order, each followed by kSep. Version 1 of the row format leads.
constexpr char kSep = '\x1f';
constexpr std::string_view kVersion = "1";

void put(std::string& out, std::string_view s) {
  for (char c : s) out.push_back(c == kSep ? ' ' : c);
  out.push_back(kSep);
}
void put(std::string& out, double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", d);
  put(out, std::string_view(buf));
}
void put(std::string& out, std::uint64_t n) {
  put(out, std::string_view(std::to_string(n)));
}

class Fields {
 public:
  explicit Fields(std::string_view row) : row_(row) {}
  std::optional<std::string_view> text() {
    auto end = row_.find(kSep);
    if (end == std::string_view::npos) return std::nullopt;
    auto out = row_.substr(0, end);
    row_.remove_prefix(end + 1);
    return out;
  }
  bool number(double& d) {
    auto t = text();
    if (!t) return false;
    d = std::strtod(std::string(*t).c_str(), nullptr);  // "nan" included
    return true;
  }
  bool count(std::uint64_t& n) {
    auto t = text();
    return t && std::from_chars(t->data(), t->data() + t->size(), n).ec == std::errc();
  }

 private:
  std::string_view row_;
};

}  // namespace

std::string encode(const Alert& a) {
  std::string out;
  put(out, kVersion);
  put(out, a.name);
  put(out, canonical_labels(a.labels));
  put(out, a.sensor);
  put(out, a.series);
  put(out, static_cast<std::uint64_t>(a.state));
  put(out, static_cast<std::uint64_t>(a.severity));
  put(out, a.summary);
  put(out, a.value);
  put(out, a.threshold);
  put(out, a.since);
  put(out, a.active_at);
  return out;
}

std::optional<Alert> decode_alert(std::string_view row) {
  Fields f(row);
  Alert a;
  std::uint64_t state = 0, severity = 0;
  auto version = f.text();
  auto name = f.text(), labels = f.text(), sensor = f.text(), series = f.text();
  if (!version || *version != kVersion || !series || !f.count(state) || !f.count(severity))
    return std::nullopt;
  auto summary = f.text();
  if (!summary || state > 3 || severity > 2 || !f.number(a.value) || !f.number(a.threshold) ||
      !f.number(a.since) || !f.number(a.active_at))
    return std::nullopt;
  a.name = *name;
  a.labels = parse_labels(*labels);
  a.sensor = *sensor;
  a.series = *series;
  a.state = static_cast<AlertState>(state);
  a.severity = static_cast<Severity>(severity);
  a.summary = *summary;
  return a;
}

std::string encode(const AlertNotice& n) {
  std::string out;
  put(out, kVersion);
  put(out, n.name);
  put(out, canonical_labels(n.labels));
  put(out, n.sensor);
  put(out, static_cast<std::uint64_t>(n.severity));
  put(out, static_cast<std::uint64_t>(n.firing));
  put(out, n.summary);
  put(out, n.value);
  put(out, n.threshold);
  put(out, n.starts_at);
  put(out, n.ends_at);
  return out;
}

std::optional<AlertNotice> decode_notice(std::string_view row) {
  Fields f(row);
  AlertNotice n;
  std::uint64_t severity = 0, firing = 0;
  auto version = f.text();
  auto name = f.text(), labels = f.text(), sensor = f.text();
  if (!version || *version != kVersion || !sensor || !f.count(severity) || !f.count(firing))
    return std::nullopt;
  auto summary = f.text();
  if (!summary || severity > 2 || !f.number(n.value) || !f.number(n.threshold) ||
      !f.number(n.starts_at) || !f.number(n.ends_at))
    return std::nullopt;
  n.name = *name;
  n.labels = parse_labels(*labels);
  n.sensor = *sensor;
  n.severity = static_cast<Severity>(severity);
  n.firing = firing != 0;
  n.summary = *summary;
  return n;
}

std::vector<Alert> AlertLog::states() const {
  std::lock_guard lock(mutex_);
  return states_;
}

void AlertLog::set_states(std::vector<Alert> alerts) {
  std::lock_guard lock(mutex_);
  states_ = std::move(alerts);
  states_dirty_ = true;
}

std::uint64_t AlertLog::append(AlertNotice notice) {
  std::lock_guard lock(mutex_);
  notice.sequence = next_sequence_++;
  pending_.push_back(std::move(notice));
  while (pending_.size() > kMaxEvents) pending_.pop_front();
  return pending_.back().sequence;
}

std::vector<AlertNotice> AlertLog::events_after(std::uint64_t after, std::size_t max) const {
  std::lock_guard lock(mutex_);
  std::vector<AlertNotice> out;
  auto it = std::upper_bound(committed_.begin(), committed_.end(), after,
                             [](std::uint64_t s, const AlertNotice& n) { return s < n.sequence; });
  for (; it != committed_.end() && out.size() < max; ++it) out.push_back(*it);
  return out;
}

std::uint64_t AlertLog::newest() const {
  std::lock_guard lock(mutex_);
  return committed_.empty() ? next_sequence_ - 1 - pending_.size() : committed_.back().sequence;
}

void AlertLog::forget_through(std::uint64_t sequence) {
  std::lock_guard lock(mutex_);
  while (!committed_.empty() && committed_.front().sequence <= sequence) committed_.pop_front();
  forget_through_ = std::max(forget_through_, sequence);
}

void AlertLog::load(sql::Connection& db) {
  std::lock_guard lock(mutex_);
  sql::Statement st;
  if (st.prepare(db, "SELECT data FROM alert_state ORDER BY id", false) != sql::kOk)
    throw db.error("cannot read alert state");
  states_.clear();
  for (auto rows = st.query(); rows.next();)
    if (auto a = decode_alert(rows.text(0))) states_.push_back(std::move(*a));
  sql::Statement ev;
  if (ev.prepare(db, "SELECT seq, data FROM alert_events ORDER BY seq", false) != sql::kOk)
    throw db.error("cannot read alert events");
  committed_.clear();
  std::uint64_t newest = 0;
  for (auto rows = ev.query(); rows.next();) {
    newest = static_cast<std::uint64_t>(rows.int64(0));
    if (auto n = decode_notice(rows.text(1))) {
      n->sequence = newest;
      committed_.push_back(std::move(*n));
    }
  }
  while (committed_.size() > kMaxEvents) committed_.pop_front();
  next_sequence_ = std::max(next_sequence_, newest + 1);
}

AlertLog::Batch AlertLog::take() {
  std::lock_guard lock(mutex_);
  Batch b;
  if (states_dirty_) b.states = states_;
  states_dirty_ = false;
  if (rewrite_events_) b.events.assign(committed_.begin(), committed_.end());
  rewrite_events_ = false;
  b.events.insert(b.events.end(), pending_.begin(), pending_.end());
  pending_.clear();
  // The oldest kept bounds the file too.
  b.forget_through = forget_through_;
  const std::uint64_t first = committed_.empty() ? 0 : committed_.front().sequence;
  if (committed_.size() + b.events.size() > kMaxEvents && !b.events.empty())
    b.forget_through = std::max(b.forget_through, b.events.back().sequence - kMaxEvents);
  else if (first > 1)
    b.forget_through = std::max(b.forget_through, first - 1);
  return b;
}

void AlertLog::write(sql::Connection& db, const Batch& b) {
  if (b.states) {
    db.exec("DELETE FROM alert_state");
    sql::Statement ins;
    if (ins.prepare(db, "INSERT INTO alert_state(id, data) VALUES(?1, ?2)", false) != sql::kOk)
      throw db.error("cannot write alert state");
    std::int64_t id = 0;
    for (const Alert& a : *b.states)
      if (ins.execute(++id, encode(a)) != sql::kDone) throw db.error("cannot write alert state");
  }
  if (!b.events.empty()) {
    sql::Statement ins;
    if (ins.prepare(db, "INSERT OR REPLACE INTO alert_events(seq, data) VALUES(?1, ?2)", false) !=
        sql::kOk)
      throw db.error("cannot write alert events");
    for (const AlertNotice& n : b.events)
      if (ins.execute(static_cast<std::int64_t>(n.sequence), encode(n)) != sql::kDone)
        throw db.error("cannot write alert events");
  }
  if (b.forget_through > 0) {
    sql::Statement del;
    // The newest row stays: its number is where the next agent on this file continues, so a
    // notifier's cursor never points past a new transition.
    if (del.prepare(db,
                    "DELETE FROM alert_events WHERE seq <= ?1 AND seq < (SELECT max(seq) FROM "
                    "alert_events)",
                    false) != sql::kOk ||
        del.execute(static_cast<std::int64_t>(b.forget_through)) != sql::kDone)
      throw db.error("cannot prune alert events");
  }
}

void AlertLog::committed(Batch b) {
  std::lock_guard lock(mutex_);
  for (auto& n : b.events)
    if (n.sequence > forget_through_ &&
        (committed_.empty() || n.sequence > committed_.back().sequence))
      committed_.push_back(std::move(n));
  while (committed_.size() > kMaxEvents) committed_.pop_front();
}

void AlertLog::put_back(Batch b) {
  std::lock_guard lock(mutex_);
  if (b.states && !states_dirty_) {
    states_dirty_ = true;  // states_ is newer or equal
  }
  pending_.insert(pending_.begin(), b.events.begin(), b.events.end());
  while (pending_.size() > kMaxEvents) pending_.pop_front();
}

void AlertLog::all_dirty() {
  std::lock_guard lock(mutex_);
  states_dirty_ = true;
  rewrite_events_ = true;
}

}  // namespace kiwi::agent
