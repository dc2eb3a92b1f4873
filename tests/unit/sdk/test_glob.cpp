// The SDK's globs (kiwi/glob.hpp): series patterns of history queries and outputs, and the
// include/exclude lists of sensors' options.
#include <catch2/catch.hpp>

#include <kiwi/glob.hpp>

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
