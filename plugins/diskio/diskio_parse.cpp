#include "diskio_parse.hpp"

#include <algorithm>
#include <charconv>
#include <kiwi/io.hpp>
#include <kiwi/text.hpp>
#include <stdexcept>

namespace kiwi::diskio {
std::vector<DiskCounters> parse_diskstats(std::string_view text) {
  std::vector<DiskCounters> out;
  for (std::string_view line : Lines(text)) {
    Fields fields(line);
    std::string_view major = fields.next();
    if (major.empty()) continue;  // blank line
    std::string_view minor = fields.next();
    DiskCounters disk;
    disk.name = std::string(fields.next());
    if (!to_number<unsigned>(major) || !to_number<unsigned>(minor) || disk.name.empty())
      throw std::invalid_argument("line " + quote_excerpt(line) +
                                  ": expected 'major minor name' and 11 counters");
    const std::size_t count = read_counters(fields.rest(), disk.counters, line);
    if (count < disk.counters.size())
      throw std::invalid_argument("line " + quote_excerpt(line) + ": expected at least " +
                                  std::to_string(disk.counters.size()) +
                                  " counters after the name");
    out.push_back(std::move(disk));
  }
  return out;
}

std::string sysfs_block_name(std::string_view diskstats_name) {
  std::string out(diskstats_name);
  std::replace(out.begin(), out.end(), '/', '!');
  return out;
}

}  // namespace kiwi::diskio
