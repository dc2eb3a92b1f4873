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

bool is_mmc_card(std::string_view name) {
  constexpr std::string_view prefix = "mmcblk";
  if (!name.starts_with(prefix) || name.size() == prefix.size()) return false;
  return std::all_of(name.begin() + prefix.size(), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<std::uint8_t> parse_ext_csd_byte(std::string_view text) {
  text = kiwi::trim(text);
  if (text.starts_with("0x") || text.starts_with("0X")) text.remove_prefix(2);
  if (text.empty() || text.size() > 2) return std::nullopt;
  std::uint8_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 16);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

std::optional<std::array<std::uint8_t, 2>> parse_life_time(std::string_view text) {
  Fields fields(text);
  const auto a = parse_ext_csd_byte(fields.next());
  const auto b = parse_ext_csd_byte(fields.next());
  if (!a || !b || !fields.next().empty()) return std::nullopt;
  return std::array<std::uint8_t, 2>{*a, *b};
}

std::optional<LifeUsed> life_used(std::uint8_t estimate) {
  if (estimate == 0 || estimate > 0x0b) return std::nullopt;
  if (estimate == 0x0b) return LifeUsed{1, 1};
  return LifeUsed{(estimate - 1) / 10.0, estimate / 10.0};
}

std::optional<std::uint8_t> pre_eol_level(std::uint8_t pre_eol_info) {
  if (pre_eol_info == 0 || pre_eol_info > 3) return std::nullopt;
  return pre_eol_info;
}

}  // namespace kiwi::diskio
