// The thermal sensor's parsers: a millidegree file, and the names it derives from directory
// listings and chip/zone names (one name per line of the input).
#include <cmath>
#include <string>
#include <vector>

#include <kiwi/sysfs.hpp>

#include "fuzz_support.hpp"
#include "thermal_parse.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in = kiwi_fuzz::text(data, size);
  if (auto c = kiwi::thermal::parse_millidegrees(in)) KIWI_FUZZ_CHECK(std::isfinite(*c));
  std::vector<std::string> names;
  std::string_view rest = in;
  while (!rest.empty() && names.size() < 256) {
    const auto nl = rest.find('\n');
    names.emplace_back(rest.substr(0, nl));
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
  }
  (void)kiwi::select_numbered(names, "thermal_zone");
  (void)kiwi::select_numbered(names, "temp", "_input");
  std::vector<std::string> derived;
  for (std::size_t i = 0; i < names.size(); ++i) {
    derived.push_back(kiwi::thermal::thermal_zone_hwmon_name(names[i]));
    derived.push_back(kiwi::thermal::hwmon_sensor_name(names[i], i % 2 ? names[i] : "",
                                                       static_cast<unsigned>(i)));
  }
  const std::size_t before = derived.size();
  kiwi::make_names_unique(derived);
  KIWI_FUZZ_CHECK(derived.size() == before);
  for (std::size_t i = 0; i < derived.size(); ++i)
    for (std::size_t j = i + 1; j < derived.size() && derived.size() < 64; ++j)
      KIWI_FUZZ_CHECK(derived[i] != derived[j]);
  return 0;
}
