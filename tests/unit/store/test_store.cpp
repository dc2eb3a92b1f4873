// The store as a whole (store/store.hpp), and the glob helpers its queries use.
#include <catch2/catch.hpp>

#include "store_test_support.hpp"

#include <kiwi/glob.hpp>

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

TEST_CASE("glob matching") {
  CHECK(kiwi::glob_match("cpu_*", "cpu_usage_ratio"));
  CHECK(kiwi::glob_match("*_bytes", "memory_total_bytes"));
  CHECK(kiwi::glob_match("*", ""));
  CHECK(kiwi::glob_match("a*b*c", "aXXbYYc"));
  CHECK_FALSE(kiwi::glob_match("cpu_*", "memory_total_bytes"));
  CHECK_FALSE(kiwi::glob_match("cpu", "cpu_usage_ratio"));
}

TEST_CASE("name filter: included by a glob and not excluded, exclusion wins") {
  const kiwi::NameFilter f({"eth*", "wlan0"}, {"eth9*"});
  CHECK(f.passes("eth0"));
  CHECK(f.passes("wlan0"));
  CHECK_FALSE(f.passes("wlan1"));                        // not included
  CHECK_FALSE(f.passes("eth99"));                        // excluded, though included
  CHECK_FALSE(kiwi::NameFilter({}, {}).passes("eth0"));  // an empty include list: nothing
  // Another matcher: path prefixes, as the storage sensor's mount options use.
  const kiwi::NameFilter paths(
      {"/"}, {"/proc"}, [](std::string_view p, std::string_view n) { return n.starts_with(p); });
  CHECK(paths.passes("/home"));
  CHECK_FALSE(paths.passes("/proc/sys"));
}
