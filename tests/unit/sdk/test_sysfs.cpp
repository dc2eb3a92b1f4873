// The SDK's sysfs helpers (kiwi/sysfs.hpp): numbered entries in number order and names made
// unique, as the thermal and hwmon sensors name what they find. hwmon_chips() is tested through
// those sensors, on fixture trees with device links.
#include <catch2/catch.hpp>

#include <kiwi/sysfs.hpp>

TEST_CASE("sysfs: thermal_zone10 sorts after thermal_zone9, other entries are ignored") {
  const std::vector<std::string> names = {"thermal_zone10", "cooling_device0", "thermal_zone9",
                                          "thermal_zone2",  "thermal_zoneX",   "thermal_zone"};
  const auto zones = kiwi::select_numbered(names, "thermal_zone");
  REQUIRE(zones.size() == 3);
  CHECK(zones[0].name == "thermal_zone2");
  CHECK(zones[1].name == "thermal_zone9");
  CHECK(zones[2].number == 10);

  const std::vector<std::string> files = {"temp1_max",   "temp10_input", "temp2_input", "name",
                                          "temp1_input", "temp1_label",  "in0_input"};
  const auto inputs = kiwi::select_numbered(files, "temp", "_input");
  REQUIRE(inputs.size() == 3);
  CHECK(inputs[0].name == "temp1_input");
  CHECK(inputs[2].name == "temp10_input");
}

TEST_CASE("sysfs: duplicate names get _2, _3 in order, never clashing") {
  std::vector<std::string> names = {"nvme_Composite", "nvme_Composite", "a", "a", "a_2", "a"};
  kiwi::make_names_unique(names);
  CHECK(names ==
        std::vector<std::string>{"nvme_Composite", "nvme_Composite_2", "a", "a_3", "a_2", "a_4"});
}
