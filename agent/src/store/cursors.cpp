#include "store/cursors.hpp"

namespace kiwi::agent {

std::optional<std::int64_t> Cursors::get(const std::string& output) const {
  std::lock_guard lock(mutex_);
  auto it = cursors_.find(output);
  if (it == cursors_.end()) return std::nullopt;
  return it->second;
}

void Cursors::set(const std::string& output, std::int64_t acked_ms) {
  std::lock_guard lock(mutex_);
  cursors_[output] = acked_ms;
  dirty_[output] = acked_ms;
}

void Cursors::load(sql::Connection& db) {
  sql::Statement c;
  if (c.prepare(db, "SELECT name, acked_ms FROM output_cursors", false) != sql::kOk)
    throw db.error("cannot read output cursors");
  std::lock_guard lock(mutex_);
  for (auto rows = c.query(); rows.next();) cursors_[std::string(rows.text(0))] = rows.int64(1);
}

Cursors::Map Cursors::take_dirty() {
  Map out;
  std::lock_guard lock(mutex_);
  out.swap(dirty_);
  return out;
}

void Cursors::put_back(const Map& cursors) {
  std::lock_guard lock(mutex_);
  for (auto& [name, acked] : cursors) dirty_.try_emplace(name, acked);  // newer wins
}

void Cursors::all_dirty() {
  std::lock_guard lock(mutex_);
  for (auto& [name, acked] : cursors_) dirty_.try_emplace(name, acked);
}

}  // namespace kiwi::agent
