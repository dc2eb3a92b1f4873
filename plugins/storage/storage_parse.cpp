#include "storage_parse.hpp"

#include <algorithm>
#include <kiwi/glob.hpp>
#include <kiwi/text.hpp>
#include <map>
#include <stdexcept>

namespace kiwi::storage {
namespace {

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  for (std::string_view field : kiwi::Fields(line)) fields.push_back(field);
  return fields;
}

bool is_octal(char c) {
  return c >= '0' && c <= '7';
}

}  // namespace

std::string decode_octal_escapes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 3 < text.size() && is_octal(text[i + 1]) && is_octal(text[i + 2]) &&
        is_octal(text[i + 3])) {
      out.push_back(static_cast<char>((text[i + 1] - '0') * 64 + (text[i + 2] - '0') * 8 +
                                      (text[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

bool has_option(std::string_view options, std::string_view option) {
  while (!options.empty()) {
    std::size_t comma = std::min(options.find(','), options.size());
    if (options.substr(0, comma) == option) return true;
    options.remove_prefix(std::min(comma + 1, options.size()));
  }
  return false;
}

std::vector<MountEntry> parse_mountinfo(std::string_view text) {
  std::vector<MountEntry> out;
  kiwi::Lines lines(text);
  while (const auto line = lines.next()) {
    const auto fields = split_fields(*line);
    if (fields.empty()) continue;

    // id parent major:minor root mount_point options [optional...] - fstype source super_options
    auto sep = std::find(fields.begin(), fields.end(), "-");
    if (fields.size() < 6 || sep == fields.end() || sep - fields.begin() < 6 ||
        fields.end() - sep < 3)
      throw std::invalid_argument("line " + std::to_string(lines.number()) +
                                  ": expected 'id parent major:minor root mount_point options"
                                  " ... - fstype source super_options'");
    MountEntry m;
    m.device = fields[2];
    m.root = decode_octal_escapes(fields[3]);
    m.mount_point = decode_octal_escapes(fields[4]);
    m.mount_options = fields[5];
    m.fstype = sep[1];
    m.source = decode_octal_escapes(sep[2]);
    m.super_options = fields.end() - sep > 3 ? sep[3] : std::string_view{};
    m.readonly = has_option(m.mount_options, "ro") || has_option(m.super_options, "ro");
    out.push_back(std::move(m));
  }
  return out;
}

bool under_path(std::string_view mount_point, std::string_view prefix) {
  while (prefix.size() > 1 && prefix.back() == '/') prefix.remove_suffix(1);
  if (prefix == "/") return true;
  return mount_point.starts_with(prefix) &&
         (mount_point.size() == prefix.size() || mount_point[prefix.size()] == '/');
}

bool statvfs_answers_from_memory(std::string_view fstype) {
  constexpr std::string_view kTypes[] = {"ext2",  "ext3", "ext4",  "xfs",
                                         "btrfs", "f2fs", "tmpfs", "ramfs"};
  return std::find(std::begin(kTypes), std::end(kTypes), fstype) != std::end(kTypes);
}

std::vector<MountEntry> select_mounts(std::vector<MountEntry> mounts, const MountFilter& filter) {
  const kiwi::NameFilter types(filter.include_types, filter.exclude_types);
  const kiwi::NameFilter paths(filter.include_mounts, filter.exclude_mounts,
                               [](std::string_view prefix, std::string_view mount_point) {
                                 return under_path(mount_point, prefix);
                               });
  std::erase_if(mounts, [&](const MountEntry& m) {
    return !types.passes(m.fstype) || !paths.passes(m.mount_point);
  });

  // statvfs sees only the last filesystem mounted on a path; earlier ones are hidden.
  std::map<std::string, std::size_t> last_at_path;
  for (std::size_t i = 0; i < mounts.size(); ++i) last_at_path[mounts[i].mount_point] = i;
  // One entry per filesystem: the shortest mount point, the first one of equal length.
  std::map<std::string, std::size_t> best_for_device;
  for (std::size_t i = 0; i < mounts.size(); ++i) {
    if (last_at_path[mounts[i].mount_point] != i) continue;
    auto [it, inserted] = best_for_device.emplace(mounts[i].device, i);
    if (!inserted && mounts[i].mount_point.size() < mounts[it->second].mount_point.size())
      it->second = i;
  }
  std::vector<MountEntry> out;
  for (std::size_t i = 0; i < mounts.size(); ++i) {
    auto best = best_for_device.find(mounts[i].device);
    if (best != best_for_device.end() && best->second == i) out.push_back(std::move(mounts[i]));
  }
  return out;
}

FsUsage compute_usage(const FsStats& s) {
  const double bs = static_cast<double>(s.block_size);
  FsUsage u;
  u.size_bytes = static_cast<double>(s.blocks) * bs;
  u.available_bytes = static_cast<double>(s.blocks_avail) * bs;
  u.used_bytes = static_cast<double>(s.blocks - std::min(s.blocks_free, s.blocks)) * bs;
  const double denominator = u.used_bytes + u.available_bytes;
  u.used_ratio = denominator > 0 ? u.used_bytes / denominator : 0;
  u.inodes_total = static_cast<double>(s.inodes);
  u.inodes_free = static_cast<double>(s.inodes_free);
  return u;
}

}  // namespace kiwi::storage
