// The diskio sensor's parsers: /proc/diskstats and the sysfs name of each device it lists.
#include <stdexcept>

#include "diskio_parse.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in = kiwi_fuzz::text(data, size);
  try {
    for (auto& d : kiwi::diskio::parse_diskstats(in)) (void)d;
  } catch (const std::invalid_argument&) {
  }
  (void)kiwi::diskio::sysfs_block_name(in);
  return 0;
}
