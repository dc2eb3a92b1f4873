#include "thermal_sensor.hpp"

#include <algorithm>
#include <filesystem>
#include <kiwi/io.hpp>
#include <stdexcept>
#include <system_error>

#include "thermal_parse.hpp"

namespace kiwi::thermal {
namespace {

// Entry names of a directory; empty if it does not exist (no thermal class on many VMs).
std::vector<std::string> list_dir(const std::string& path) {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
    throw fs::filesystem_error("cannot list directory", path, ec);
  return names;
}

// Trimmed content of a small attribute file, or `fallback` if it is absent or empty.
std::string read_attribute(const std::string& path, std::string_view fallback) {
  auto text = kiwi::read_file(path);
  std::string_view value = text ? kiwi::trim(*text) : std::string_view{};
  return std::string(value.empty() ? fallback : value);
}

}  // namespace

ThermalSensor::ThermalSensor(const kiwi::SensorContext& ctx)
    : sysfs_(ctx.sysfs), filter_({"*"}, ctx.options.get_strings("exclude")), log_(ctx.log) {}

std::vector<ThermalSensor::Source> ThermalSensor::discover() const {
  std::vector<Source> found;
  std::set<std::string> zone_mirrors;

  const std::string zones = kiwi::join_path(sysfs_, "class/thermal");
  for (const auto& zone : select_numbered(list_dir(zones), "thermal_zone")) {
    const std::string dir = kiwi::join_path(zones, zone.name);
    std::string type = read_attribute(kiwi::join_path(dir, "type"), zone.name);
    zone_mirrors.insert(thermal_zone_hwmon_name(type));
    found.push_back({std::move(type), kiwi::KeptFile(kiwi::join_path(dir, "temp"))});
  }

  // hwmonN numbers follow probe order, which can change from one boot to the next (two NVMe
  // drives race). Chips are ordered by the device they belong to (`device` resolves to a stable
  // path such as /sys/devices/pci0000:00/0000:00:1d.0/.../nvme0), so the _2 of a duplicate name
  // stays with the same drive; chips without a device link keep number order, ahead of the others.
  struct Chip {
    std::string device;
    unsigned number;
    std::string dir;
  };
  std::vector<Chip> ordered;
  const std::string chips = kiwi::join_path(sysfs_, "class/hwmon");
  for (const auto& chip : select_numbered(list_dir(chips), "hwmon")) {
    const std::string dir = kiwi::join_path(chips, chip.name);
    std::error_code ec;
    const auto device = std::filesystem::canonical(kiwi::join_path(dir, "device"), ec);
    ordered.push_back({ec ? std::string() : device.string(), chip.number, dir});
  }
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const Chip& a, const Chip& b) { return a.device < b.device; });
  for (const auto& chip : ordered) {
    const std::string chip_name =
        read_attribute(kiwi::join_path(chip.dir, "name"), "hwmon" + std::to_string(chip.number));
    if (zone_mirrors.count(chip_name)) continue;  // a thermal zone we already report
    for (const auto& input : select_numbered(list_dir(chip.dir), "temp", "_input")) {
      const std::string label = read_attribute(
          kiwi::join_path(chip.dir, "temp" + std::to_string(input.number) + "_label"), "");
      found.push_back({hwmon_sensor_name(chip_name, label, input.number),
                       kiwi::KeptFile(kiwi::join_path(chip.dir, input.name))});
    }
  }

  std::vector<std::string> names;
  for (const auto& s : found) names.push_back(s.name);
  make_unique(names);
  for (std::size_t i = 0; i < found.size(); ++i) found[i].name = std::move(names[i]);
  return found;
}

kiwi::SampleResult ThermalSensor::sample(kiwi::MetricSink& sink) {
  std::size_t present = 0;
  std::size_t readable = 0;
  double max_celsius = 0;
  std::vector<std::string> failed;
  std::set<std::string> failing_now;
  std::size_t excluded = 0;
  const auto now = std::chrono::steady_clock::now();
  if (!discovered_at_ || now - *discovered_at_ >= kRediscoverEvery) {
    sources_ = discover();
    discovered_at_ = now;
  }
  for (auto& source : sources_) {
    if (!filter_.passes(source.name)) {
      ++excluded;
      continue;
    }
    std::string error;
    try {
      const auto text = source.temp.read();
      if (!text) {  // a zone without a temp file is not a sensor; one that went away: look again
        discovered_at_.reset();
        continue;
      }
      if (auto celsius = parse_millidegrees(*text)) {
        sink.emit(kCelsius, {source.name}, *celsius);
        max_celsius = readable++ == 0 ? *celsius : std::max(max_celsius, *celsius);
      } else {
        error = source.temp.path() +
                ": not a millidegree value: " + kiwi::quote_excerpt(kiwi::trim(*text));
      }
    } catch (const std::system_error& e) {
      error = e.what();  // EIO from a flaky sensor, ENODATA from a disabled zone
    }
    ++present;
    if (error.empty()) continue;
    failed.push_back(source.name + " (" + error + ")");
    failing_now.insert(source.name);
    if (!failing_.count(source.name)) log_.warn("thermal sensor " + failed.back() + " failed");
  }
  for (const auto& name : failing_)
    if (!failing_now.count(name)) log_.info("thermal sensor " + name + " readable again");
  failing_ = std::move(failing_now);

  if (present == 0)
    return kiwi::SampleResult::no_data(excluded ? "every thermal sensor is in the exclude option"
                                                : "no thermal zones or hwmon sensors");
  if (readable == 0) throw std::runtime_error("all thermal sensors failed: " + join(failed));
  sink.emit(kMaxCelsius, max_celsius);
  return kiwi::SampleResult::ok(failed.empty() ? "" : "skipped " + join(failed));
}

}  // namespace kiwi::thermal
