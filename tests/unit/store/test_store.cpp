// The store as a whole (store/store.hpp).
#include <sys/wait.h>
#include <unistd.h>

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

namespace {
// Runs `body` in a child process that ends with _exit() (as a kill -9 after its last commit
// would: a store it makes with `new` is never closed), and waits for it.
template <class Body>
void in_killed_child(Body body) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    try {
      body();
    } catch (...) {
      _exit(1);
    }
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
}

std::string series_in_file(const TempDb& db) {
  return kiwi_test::sqlite_value(db.path(), "SELECT COUNT(*) FROM series");
}
}  // namespace

TEST_CASE(
    "store: new series reach SQLite with the hour's fold and until then the tick log carries them "
    "through a kill") {
  TempDb db;
  const std::int64_t t0 = 1'764'475'200'000;  // an hour's start
  in_killed_child([&] {
    Store& store = *new Store(db.path());
    append(store, t0 + 1000, {metric("a", 1, ""), metric("b", 2, "", {{"core", "0"}})});
    append(store, t0 + 2000, {metric("a", 3, ""), metric("c", 4, "hertz")});
  });
  CHECK(series_in_file(db) == "0");  // no write to SQLite for them: the records carry them
  {
    Store store(db.path());
    auto r = store.query({});
    REQUIRE(r.series.size() == 3);
    CHECK(r.series[0].key == "a");
    CHECK(r.series[0].values == std::vector<double>{1, 3});
    CHECK(r.series[1].key == "b{core=\"0\"}");
    CHECK(r.series[2].key == "c");
    CHECK(r.series[2].unit == "hertz");
    // Ids go on from the carried ones: a new series after the restart is the fourth.
    append(store, t0 + 3000, {metric("d", 5, ""), metric("a", 6, "")});
    CHECK(store.series()->size() == 4);
  }  // a clean close writes them all
  CHECK(series_in_file(db) == "4");
  in_killed_child([&] {
    Store& store = *new Store(db.path());
    append(store, t0 + 4000, {metric("e", 7, "")});                   // carried
    append(store, t0 + Store::kHourMs + 1000, {metric("f", 8, "")});  // the fold writes e and f
    append(store, t0 + Store::kHourMs + 2000, {metric("g", 9, "")});  // carried
  });
  CHECK(series_in_file(db) == "6");
  Store store(db.path());
  auto r = store.query({});
  REQUIRE(r.series.size() == 7);
  auto at = [&](const std::string& key, std::int64_t ts) {
    for (std::size_t i = 0; i < r.timestamps.size(); ++i)
      if (r.timestamps[i] * 1000 == static_cast<double>(ts)) return find(r, key)->values.at(i);
    return -1.0;
  };
  CHECK(at("e", t0 + 4000) == 7);
  CHECK(at("f", t0 + Store::kHourMs + 1000) == 8);
  CHECK(at("g", t0 + Store::kHourMs + 2000) == 9);
}

TEST_CASE("store: a tick with more new series than a record should carry writes them at once") {
  TempDb db;
  std::vector<kiwi::MetricValue> many;
  for (int i = 0; i < 100; ++i)
    many.push_back(
        metric("a_rather_long_metric_name_for_a_process", i, "", {{"command", std::to_string(i)}}));
  in_killed_child([&] {
    Store& store = *new Store(db.path());
    append(store, 1'764'475'200'000, many);
  });
  CHECK(series_in_file(db) == "100");
}
