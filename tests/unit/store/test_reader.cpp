// The read side (store/reader.hpp): read-only connections.
#include <sqlite3.h>

#include <catch2/catch.hpp>

#include "store/reader.hpp"
#include "store_test_support.hpp"

using namespace kiwi::agent;
using namespace store_test;

TEST_CASE("store: the read-only connection refuses writes") {
  TempDb db;
  Store store(db.path());
  append(store, 1000, {metric("a", 1, "")});
  TickLog log(db.path() + "-ticks");
  ReadConnection reader(db.path(), log);
  CHECK(reader.db().try_exec("DELETE FROM samples") == SQLITE_READONLY);
  CHECK(store.query({}).timestamps.size() == 1);
}
