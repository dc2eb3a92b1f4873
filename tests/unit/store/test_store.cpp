// The store as a whole (store/store.hpp).
#include <catch2/catch.hpp>

#include "store_test_support.hpp"

using namespace kiwi::agent;
using namespace store_test;

TEST_CASE("store: history and series survive a reopen") {
  TempDb db;
  {
    Store store(db.path());
    append(store, 1000, {metric("x", 1.5, "celsius", {{"sensor", "soc-thermal"}})});
  }
  Store store(db.path());
  append(store, 2000,
         {metric("x", 2.5, "celsius", {{"sensor", "soc-thermal"}}), metric("y", 1, "")});
  auto r = store.query({});
  REQUIRE(r.series.size() == 2);
  CHECK(r.series[0].key == "x{sensor=\"soc-thermal\"}");
  CHECK(r.series[0].values == std::vector<double>{1.5, 2.5});
}
