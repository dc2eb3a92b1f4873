// kiwi-agent plugin SDK: sysfs directories as sensors list them: numbered entries in number order
// (thermal_zone10 after thermal_zone9), small attributes, hwmon chips in an order that survives a
// reboot, and names made unique with _2, _3. Paths are built from the configured sysfs root
// (SensorContext::sysfs), never "/sys".
#pragma once

#include <algorithm>
#include <filesystem>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "kiwi/io.hpp"
#include "kiwi/text.hpp"

namespace kiwi {

// Entry names of a directory, in the order the filesystem lists them; empty if it does not exist
// (no thermal class on many VMs). Throws std::filesystem::error for any other failure.
inline std::vector<std::string> list_directory(const std::string& path) {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
    throw fs::filesystem_error("cannot list directory", path, ec);
  return names;
}

// Trimmed content of a small attribute file, or `fallback` if it is absent or empty. Throws as
// read_file() does when it exists but cannot be read.
inline std::string read_attribute(const std::string& path, std::string_view fallback) {
  auto text = kiwi::read_file(path);
  std::string_view value = text ? kiwi::trim(*text) : std::string_view{};
  return std::string(value.empty() ? fallback : value);
}

struct NumberedName {
  unsigned number = 0;
  std::string name;
};

// Keeps the names that are exactly prefix + decimal number + suffix ("thermal_zone12",
// "temp3_input") and sorts them by that number, so thermal_zone10 comes after thermal_zone9 and the
// order (and so the _2, _3 suffixes of duplicate names) does not depend on the directory listing.
inline std::vector<NumberedName> select_numbered(std::span<const std::string> names,
                                                 std::string_view prefix,
                                                 std::string_view suffix = {}) {
  std::vector<NumberedName> out;
  for (const auto& name : names) {
    std::string_view s = name;
    if (!s.starts_with(prefix) || !s.ends_with(suffix)) continue;
    s = s.substr(prefix.size(), s.size() - prefix.size() - suffix.size());
    if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    if (auto n = to_number<unsigned>(s)) out.push_back({*n, name});
  }
  std::sort(out.begin(), out.end(),
            [](const NumberedName& a, const NumberedName& b) { return a.number < b.number; });
  return out;
}

// Makes names unique in place, keeping the first occurrence and appending _2, _3, ... to later ones
// (skipping suffixes that are already taken).
inline void make_names_unique(std::vector<std::string>& names) {
  std::set<std::string> taken(names.begin(), names.end());
  std::set<std::string> seen;
  for (auto& name : names) {
    if (seen.insert(name).second) continue;
    for (unsigned n = 2;; ++n) {
      std::string candidate = name + "_" + std::to_string(n);
      if (taken.insert(candidate).second) {
        name = std::move(candidate);
        seen.insert(name);
        break;
      }
    }
  }
}

// One <sysfs>/class/hwmon/hwmonN directory.
struct HwmonChip {
  std::string dir;      // <sysfs>/class/hwmon/hwmonN
  std::string name;     // its `name` attribute ("nvme", "coretemp"), or "hwmonN" without one
  unsigned number = 0;  // N
};

// The hwmon chips under `sysfs`, ordered by the device each belongs to. hwmonN numbers follow probe
// order, which can change from one boot to the next (two NVMe drives race); `device` resolves to a
// stable path such as /sys/devices/pci0000:00/0000:00:1d.0/.../nvme0, so the _2 that
// make_names_unique() gives the second of two chips of one name stays with the same drive. Chips
// without a device link keep number order, ahead of the others. Names are as the chips give them,
// not made unique.
inline std::vector<HwmonChip> hwmon_chips(const std::string& sysfs) {
  struct Chip {
    std::string device;
    unsigned number;
    std::string dir;
  };
  std::vector<Chip> ordered;
  const std::string chips = kiwi::join_path(sysfs, "class/hwmon");
  for (const auto& chip : select_numbered(list_directory(chips), "hwmon")) {
    const std::string dir = kiwi::join_path(chips, chip.name);
    std::error_code ec;
    const auto device = std::filesystem::canonical(kiwi::join_path(dir, "device"), ec);
    ordered.push_back({ec ? std::string() : device.string(), chip.number, dir});
  }
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const Chip& a, const Chip& b) { return a.device < b.device; });
  std::vector<HwmonChip> out;
  for (auto& chip : ordered) {
    std::string name =
        read_attribute(kiwi::join_path(chip.dir, "name"), "hwmon" + std::to_string(chip.number));
    out.push_back({std::move(chip.dir), std::move(name), chip.number});
  }
  return out;
}

}  // namespace kiwi
