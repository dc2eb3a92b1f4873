#include "thermal_sensor.hpp"

#include <algorithm>
#include <kiwi/io.hpp>
#include <kiwi/sysfs.hpp>
#include <stdexcept>
#include <system_error>

#include "thermal_parse.hpp"

namespace kiwi::thermal {
ThermalSensor::ThermalSensor(const kiwi::SensorContext& ctx)
    : sysfs_(ctx.sysfs), filter_({"*"}, ctx.options.get_strings("exclude")), log_(ctx.log) {}

// The lowest critical and the lowest high trip point of a zone: a zone may have several of
// each (an RK3588's soc-thermal has passive trips at 75 and 85 °C: cooling starts at the first).
void ThermalSensor::read_zone_trips(const std::string& zone_dir, Source& source) {
  const auto keep_lowest = [](std::optional<double>& limit, double t) {
    limit = limit ? std::min(*limit, t) : t;
  };
  for (const auto& trip :
       kiwi::select_numbered(kiwi::list_directory(zone_dir), "trip_point_", "_type")) {
    const auto type = kiwi::read_file_if_readable(kiwi::join_path(zone_dir, trip.name));
    const TripLimit limit = type ? trip_limit(*type) : TripLimit::none;
    if (limit == TripLimit::none) continue;
    const std::string temp = "trip_point_" + std::to_string(trip.number) + "_temp";
    if (const auto t = reads_.read(kiwi::join_path(zone_dir, temp), parse_millidegrees))
      keep_lowest(limit == TripLimit::critical ? source.critical : source.high, *t);
  }
}

void ThermalSensor::discover() {
  std::vector<Source> found;
  std::vector<Cooling> cooling;
  std::set<std::string> zone_mirrors;

  const std::string zones = kiwi::join_path(sysfs_, "class/thermal");
  const auto entries = kiwi::list_directory(zones);
  for (const auto& zone : kiwi::select_numbered(entries, "thermal_zone")) {
    const std::string dir = kiwi::join_path(zones, zone.name);
    std::string type = kiwi::read_attribute(kiwi::join_path(dir, "type"), zone.name);
    zone_mirrors.insert(thermal_zone_hwmon_name(type));
    found.push_back({std::move(type), kiwi::KeptFile(kiwi::join_path(dir, "temp")), {}, {}});
    read_zone_trips(dir, found.back());
  }
  // A cooling device without states (a VM's ACPI "Processor" has max_state 0) cools nothing.
  for (const auto& device : kiwi::select_numbered(entries, "cooling_device")) {
    const std::string dir = kiwi::join_path(zones, device.name);
    const auto max_state = reads_.read(kiwi::join_path(dir, "max_state"), parse_state);
    if (!max_state || *max_state == 0) continue;
    cooling.push_back({kiwi::read_attribute(kiwi::join_path(dir, "type"), device.name),
                       kiwi::KeptFile(kiwi::join_path(dir, "cur_state")), *max_state});
  }

  // hwmon chips in the order of the device each belongs to (kiwi/sysfs.hpp), so the _2 of a
  // duplicate name stays with the same drive from one boot to the next.
  for (const auto& chip : kiwi::hwmon_chips(sysfs_)) {
    if (zone_mirrors.count(chip.name)) continue;  // a thermal zone we already report
    for (const auto& input :
         kiwi::select_numbered(kiwi::list_directory(chip.dir), "temp", "_input")) {
      const std::string label = kiwi::read_attribute(
          kiwi::join_path(chip.dir, "temp" + std::to_string(input.number) + "_label"), "");
      const std::string temp = "temp" + std::to_string(input.number);
      found.push_back(
          {hwmon_sensor_name(chip.name, label, input.number),
           kiwi::KeptFile(kiwi::join_path(chip.dir, input.name)),
           hwmon_limit(reads_.read(kiwi::join_path(chip.dir, temp + "_crit"), parse_millidegrees)),
           hwmon_limit(reads_.read(kiwi::join_path(chip.dir, temp + "_max"), parse_millidegrees))});
    }
  }

  const auto unique = [](auto& items) {
    std::vector<std::string> names;
    for (const auto& item : items) names.push_back(item.name);
    kiwi::make_names_unique(names);
    for (std::size_t i = 0; i < items.size(); ++i) items[i].name = std::move(names[i]);
  };
  unique(found);
  unique(cooling);
  sources_ = std::move(found);
  cooling_ = std::move(cooling);
  discovery_note_ = reads_.finish(log_);
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
    discover();
    discovered_at_ = now;
  }
  // A sensor or cooling device whose file could not be read or parsed: named in the message,
  // logged when it starts failing and when it recovers, not every sample.
  const auto failing = [&](const std::string& name, const std::string& error) {
    failed.push_back(name + " (" + error + ")");
    failing_now.insert(name);
    if (!failing_.count(name)) log_.warn("thermal sensor " + failed.back() + " failed");
  };
  // The file's text, or nullopt when it is gone (look again at the next sample) or failing.
  const auto read = [&](const std::string& name, kiwi::KeptFile& file) {
    try {
      auto text = file.read();
      if (!text) discovered_at_.reset();
      return text;
    } catch (const std::system_error& e) {
      failing(name, e.what());  // EIO from a flaky sensor, ENODATA from a disabled zone
      return std::optional<std::string>();
    }
  };
  for (auto& source : sources_) {
    if (!filter_.passes(source.name)) {
      ++excluded;
      continue;
    }
    const auto text = read(source.name, source.temp);
    if (!text && !failing_now.count(source.name)) continue;  // a zone without a temp file
    ++present;
    if (!text) continue;
    if (auto celsius = parse_millidegrees(*text)) {
      sink.emit(kCelsius, {source.name}, *celsius);
      max_celsius = readable++ == 0 ? *celsius : std::max(max_celsius, *celsius);
      if (source.critical) sink.emit(kCriticalCelsius, {source.name}, *source.critical);
      if (source.high) sink.emit(kHighCelsius, {source.name}, *source.high);
    } else {
      failing(source.name, source.temp.path() + ": not a millidegree value: " +
                               kiwi::quote_excerpt(kiwi::trim(*text)));
    }
  }
  std::size_t cooling = 0;
  for (auto& device : cooling_) {
    if (!filter_.passes(device.name)) {
      ++excluded;
      continue;
    }
    const auto text = read(device.name, device.cur_state);
    if (!text) continue;
    if (auto state = parse_state(*text)) {
      sink.emit(kCoolingState, {device.name}, *state);
      sink.emit(kCoolingMaxState, {device.name}, device.max_state);
      ++cooling;
    } else {
      failing(device.name,
              device.cur_state.path() + ": not a state: " + kiwi::quote_excerpt(kiwi::trim(*text)));
    }
  }
  for (const auto& name : failing_)
    if (!failing_now.count(name)) log_.info("thermal sensor " + name + " readable again");
  failing_ = std::move(failing_now);

  if (present == 0 && cooling == 0 && failed.empty())
    return kiwi::SampleResult::no_data(excluded ? "every thermal sensor is in the exclude option"
                                                : "no thermal zones or hwmon sensors");
  if (readable == 0 && (present > 0 || cooling == 0))
    throw std::runtime_error("all thermal sensors failed: " + join(failed));
  if (readable > 0) sink.emit(kMaxCelsius, max_celsius);
  std::vector<std::string> notes;
  if (!failed.empty()) notes.push_back("skipped " + join(failed));
  if (!discovery_note_.empty()) notes.push_back(discovery_note_);
  return kiwi::SampleResult::ok(join(notes));
}

}  // namespace kiwi::thermal
