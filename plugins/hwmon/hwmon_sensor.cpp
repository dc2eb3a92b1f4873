#include "hwmon_sensor.hpp"

#include <algorithm>
#include <kiwi/sysfs.hpp>
#include <map>
#include <stdexcept>
#include <utility>

namespace kiwi::hwmon {

namespace {

// The Raspberry Pi's under-voltage hwmon (in0_lcrit_alarm only): the power sensor reports it as
// power_under_voltage_alarm, beside the firmware's throttling flags, so it is not repeated here.
constexpr std::string_view kRpiVolt = "rpi_volt";

// The file of a channel that holds its reading, and what it gives.
struct ValueFile {
  Kind kind;
  std::string_view item;
  const kiwi::MetricSpec* spec;
  Format format;
};
constexpr ValueFile kValueFiles[] = {
    {Kind::fan, "input", &kFanRpm, Format::rpm},     {Kind::fan, "min", &kFanMinRpm, Format::rpm},
    {Kind::pwm, "", &kPwmRatio, Format::pwm},        {Kind::in, "input", &kVolts, Format::milli},
    {Kind::curr, "input", &kAmperes, Format::milli}, {Kind::power, "input", &kWatts, Format::micro},
};

}  // namespace

HwmonSensor::HwmonSensor(const kiwi::SensorContext& ctx)
    : sysfs_(ctx.sysfs), filter_({"*"}, ctx.options.get_strings("exclude")), log_(ctx.log) {}

HwmonSensor::Found HwmonSensor::discover() const {
  Found found;
  const std::vector<kiwi::HwmonChip> chips = kiwi::hwmon_chips(sysfs_);
  // Chip names made unique over every chip, in device order: the second of two "nvme" chips is
  // nvme_2 whatever each of them has (kiwi/sysfs.hpp says why the order is stable).
  std::vector<std::string> chip_names;
  for (const auto& chip : chips) chip_names.push_back(chip.name);
  kiwi::make_names_unique(chip_names);

  for (std::size_t c = 0; c < chips.size(); ++c) {
    const kiwi::HwmonChip& chip = chips[c];
    if (chip.name == kRpiVolt) continue;
    // Each channel's items (input, min, lcrit_alarm, ...), channels by kind, then number.
    std::map<std::pair<Kind, unsigned>, std::vector<std::string>> channels;
    std::vector<std::string> files;
    try {
      files = kiwi::list_directory(chip.dir);
    } catch (const std::exception& e) {  // one chip's directory; the others are still read
      found.notes.push_back(e.what());
      continue;
    }
    for (const auto& file : files)
      if (const auto a = parse_attribute(file))
        channels[{a->kind, a->channel}].emplace_back(a->item);
    // Sensor names: the channel's label, or its prefix ("fan2"), unique among the chip's channels
    // of one kind (two fans labelled "CPU" are CPU and CPU_2; a fan and a voltage may share one).
    std::map<std::pair<Kind, unsigned>, std::string> names;
    for (auto it = channels.begin(); it != channels.end();) {
      const Kind kind = it->first.first;
      std::vector<std::string> of_kind;
      auto end = it;
      for (; end != channels.end() && end->first.first == kind; ++end) {
        const std::string prefix = std::string(kind_name(kind)) + std::to_string(end->first.second);
        const std::string label_file = kiwi::join_path(chip.dir, prefix + "_label");
        try {
          of_kind.push_back(kiwi::read_attribute(label_file, prefix));
        } catch (const std::exception& e) {
          found.notes.push_back(std::string(e.what()) + " (named " + prefix + ")");
          of_kind.push_back(prefix);
        }
      }
      kiwi::make_names_unique(of_kind);
      for (std::size_t i = 0; it != end; ++it, ++i) names[it->first] = std::move(of_kind[i]);
    }

    for (auto& channel : channels) {
      // Not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
      const auto& key = channel.first;
      auto& items = channel.second;
      const auto [kind, number] = key;
      const std::string& sensor = names[key];
      if (!filter_.passes(chip_names[c] + "/" + sensor)) {
        ++found.excluded;
        continue;
      }
      std::sort(items.begin(), items.end());
      const auto has = [&](std::string_view item) {
        return std::binary_search(items.begin(), items.end(), item);
      };
      const std::string prefix = std::string(kind_name(kind)) + std::to_string(number);
      auto add = [&](const kiwi::MetricSpec& spec, Format format, std::string_view item,
                     std::string alarm = {}) {
        const std::string file = item.empty() ? prefix : prefix + "_" + std::string(item);
        found.readings.push_back({&spec, format, chip_names[c], sensor, std::move(alarm),
                                  kiwi::KeptFile(kiwi::join_path(chip.dir, file))});
      };
      for (const auto& v : kValueFiles)
        if (v.kind == kind && has(v.item)) add(*v.spec, v.format, v.item);
      // A power meter may average only (ACPI's power_meter, amdgpu before 6.x): its average then.
      if (kind == Kind::power && !has("input") && has("average"))
        add(kWatts, Format::micro, "average");
      for (const auto& item : items)
        if (auto alarm = alarm_name(kind, item)) add(kAlarm, Format::flag, item, std::move(*alarm));
    }
  }
  return found;
}

kiwi::SampleResult HwmonSensor::sample(kiwi::MetricSink& sink) {
  const auto now = std::chrono::steady_clock::now();
  if (!discovered_at_ || now - *discovered_at_ >= kRediscoverEvery) {
    found_ = discover();
    discovered_at_ = now;
  }
  if (found_.readings.empty()) {
    if (!found_.notes.empty()) throw std::runtime_error(kiwi::join(found_.notes));
    if (found_.excluded)
      return kiwi::SampleResult::no_data("every hwmon channel is in the exclude option");
    return kiwi::SampleResult::no_data(
        "no hwmon fan, PWM, voltage, current or power channels under " +
        kiwi::join_path(sysfs_, "class/hwmon") + " (temperatures are the thermal sensor's, " +
        std::string(kRpiVolt) + "'s alarm the power sensor's)");
  }
  for (const auto& note : found_.notes) problems_.note(note);
  std::size_t emitted = 0;
  std::string text;
  for (auto& r : found_.readings) {
    try {
      if (!r.file.read_into(text)) {  // gone (a driver unloaded): listed again next sample
        discovered_at_.reset();
        continue;
      }
      const auto value = parse_value(r.format, text);
      if (!value) {
        problems_.note(r.file.path() + ": " + std::string(format_expected(r.format)) + ": " +
                       kiwi::quote_excerpt(text, 40));
        continue;
      }
      if (r.spec == &kAlarm)
        sink.emit(kAlarm, {r.alarm, r.chip, r.sensor}, *value);
      else
        sink.emit(*r.spec, {r.chip, r.sensor}, *value);
      ++emitted;
    } catch (const std::exception& e) {  // EIO from a flaky I2C chip, ENODATA from a disabled one
      problems_.note(e.what());
    }
  }
  const std::string note = problems_.finish(log_);
  if (emitted == 0) {
    if (note.empty()) return kiwi::SampleResult::no_data("the hwmon channels went away");
    throw std::runtime_error(note);
  }
  return kiwi::SampleResult::ok(note);
}

}  // namespace kiwi::hwmon
