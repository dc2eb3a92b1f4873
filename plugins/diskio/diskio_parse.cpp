#include "diskio_parse.hpp"

#include <algorithm>
#include <charconv>
#include <kiwi/io.hpp>
#include <stdexcept>

namespace kiwi::diskio {
std::vector<DiskCounters> parse_diskstats(std::string_view text) {
  std::vector<DiskCounters> out;
  while (!text.empty()) {
    std::size_t eol = std::min(text.find('\n'), text.size());
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(std::min(eol + 1, text.size()));

    std::string_view rest = line;
    std::string_view major = next_field(rest);
    if (major.empty()) continue;  // blank line
    std::string_view minor = next_field(rest);
    DiskCounters disk;
    disk.name = std::string(next_field(rest));
    if (!to_number<unsigned>(major) || !to_number<unsigned>(minor) || disk.name.empty())
      throw std::invalid_argument("line " + quote_excerpt(line) +
                                  ": expected 'major minor name' and 11 counters");
    const std::size_t count = read_counters(rest, disk.counters, line);
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
