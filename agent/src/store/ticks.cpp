#include "store/ticks.hpp"

namespace kiwi::agent {

int TickStatements::prepare(sql::Connection& db, const TickLog& ticks) {
  log = &ticks;
  static constexpr const char* kSql[] = {
      "SELECT ts, data FROM blocks WHERE ts BETWEEN ?1 AND ?2 AND last >= ?3 ORDER BY ts",
      "SELECT ts, data FROM blocks WHERE ts BETWEEN ?1 AND ?2 AND last >= ?3 ORDER BY ts DESC",
      "SELECT ts, data FROM samples WHERE ts BETWEEN ?1 AND ?2 ORDER BY ts",
      "SELECT ts, data FROM samples WHERE ts BETWEEN ?1 AND ?2 ORDER BY ts DESC"};
  sql::Statement* out[] = {&blocks_up, &blocks_down, &rows_up, &rows_down};
  for (int i = 0; i < 4; ++i)
    if (int rc = out[i]->prepare(db, kSql[i]); rc != sql::kOk) return rc;
  return sql::kOk;
}

}  // namespace kiwi::agent
