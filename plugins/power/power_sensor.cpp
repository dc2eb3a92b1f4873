#include "power_sensor.hpp"

#include <filesystem>
#include <kiwi/io.hpp>
#include <vector>

#include "power_parse.hpp"

namespace kiwi::power {

namespace {

namespace fs = std::filesystem;

// The firmware's get_throttled: <sysfs>/devices/platform/soc/soc:firmware/ on a Pi 4 and
// earlier, under soc@107c000000 on a Pi 5; "" when there is none.
std::string throttled_file(const std::string& sysfs) {
  std::error_code ec;
  const fs::path platform = fs::path(sysfs) / "devices/platform";
  for (fs::directory_iterator soc(platform, ec), end; !ec && soc != end; soc.increment(ec)) {
    if (!soc->path().filename().string().starts_with("soc")) continue;
    std::error_code inner;
    for (fs::directory_iterator dev(soc->path(), inner); !inner && dev != end; dev.increment(inner))
      if (dev->path().filename().string().ends_with(":firmware") &&
          fs::exists(dev->path() / "get_throttled"))
        return (dev->path() / "get_throttled").string();
  }
  return "";
}

// in0_lcrit_alarm of the hwmon named rpi_volt; "" when there is none.
std::string alarm_file(const std::string& sysfs) {
  std::error_code ec;
  for (fs::directory_iterator h(fs::path(sysfs) / "class/hwmon", ec), end; !ec && h != end;
       h.increment(ec)) {
    const auto name = kiwi::read_file_if_readable((h->path() / "name").string());
    if (name && kiwi::trim(*name) == "rpi_volt" && fs::exists(h->path() / "in0_lcrit_alarm"))
      return (h->path() / "in0_lcrit_alarm").string();
  }
  return "";
}

}  // namespace

PowerSensor::PowerSensor(const kiwi::SensorContext& ctx) : sysfs_(ctx.sysfs) {}

kiwi::SampleResult PowerSensor::sample(kiwi::MetricSink& sink) {
  // Looked up each sample (a few directory entries): the files come with the firmware driver.
  const std::string throttled = throttled_file(sysfs_), alarm = alarm_file(sysfs_);
  if (throttled.empty() && alarm.empty())
    return kiwi::SampleResult::no_data(
        "no Raspberry Pi power reporting: no firmware get_throttled under " +
        kiwi::join_path(sysfs_, "devices/platform") + " and no rpi_volt hwmon");
  std::vector<std::string> failed;
  bool any = false;
  if (!throttled.empty()) {
    try {
      const std::string text = kiwi::read_required_file(throttled);
      const auto word = parse_throttled(text);
      if (!word)
        throw std::runtime_error(throttled + ": not a hex word: " + kiwi::quote_excerpt(text, 40));
      for (const auto& f : kThrottleFlags) {
        sink.emit(kFlag, {f.name, "now"}, (*word >> f.bit) & 1u);
        sink.emit(kFlag, {f.name, "since_boot"}, (*word >> (f.bit + 16)) & 1u);
      }
      any = true;
    } catch (const std::exception& e) {
      failed.push_back(e.what());
    }
  }
  if (!alarm.empty()) {
    try {
      const std::string text = kiwi::read_required_file(alarm);
      const std::string_view v = kiwi::trim(text);
      if (v != "0" && v != "1")
        throw std::runtime_error(alarm + ": not 0 or 1: " + kiwi::quote_excerpt(text, 40));
      sink.emit(kAlarm, v == "1" ? 1.0 : 0.0);
      any = true;
    } catch (const std::exception& e) {
      failed.push_back(e.what());
    }
  }
  const std::string note = kiwi::join(failed);
  if (!any) throw std::runtime_error(note);
  return kiwi::SampleResult::ok(note);
}

}  // namespace kiwi::power
