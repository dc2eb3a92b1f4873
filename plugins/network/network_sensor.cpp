#include "network_sensor.hpp"

#include <algorithm>
#include <kiwi/io.hpp>
#include <kiwi/rates.hpp>
#include <stdexcept>
#include <system_error>

namespace kiwi::network {
NetworkSensor::NetworkSensor(const kiwi::SensorContext& ctx)
    : procfs_(ctx.procfs),
      sysfs_(ctx.sysfs),
      dev_(kiwi::join_path(procfs_, "net/dev"), kiwi::kTableReadCap),
      uptime_(kiwi::join_path(procfs_, "uptime")),
      wireless_(kiwi::join_path(procfs_, "net/wireless")),
      filter_(ctx.options.get_strings("include"), ctx.options.get_strings("exclude")) {}

kiwi::SampleResult NetworkSensor::sample(kiwi::MetricSink& sink) {
  const std::string dev_text = dev_.read_required();
  const NetDev dev = parse_net_dev(dev_text);
  const auto& all = dev.interfaces;
  std::string note;
  auto add_note = [&](const std::string& s) { note += (note.empty() ? "" : "; ") + s; };
  if (dev.skipped)
    add_note(dev_.path() + ": skipped " + std::to_string(dev.skipped) + " line" +
             (dev.skipped == 1 ? "" : "s") + ", the first: " + dev.first_skipped);
  // Only utilisation needs the clock: without it the counters are kept, and the agent's rates
  // say for themselves that they have none.
  std::optional<std::int64_t> uptime_ms;
  try {
    uptime_ms = kiwi::read_uptime_ms(uptime_);
  } catch (const std::exception& e) {
    add_note(std::string("no utilisation: ") + e.what());
  }

  Reading now{uptime_ms, {}};
  const bool clocked = uptime_ms && previous_ && previous_->uptime_ms;
  const double elapsed =
      clocked ? static_cast<double>(*uptime_ms - *previous_->uptime_ms) / 1000.0 : 0.0;
  bool any = false;
  std::erase_if(speed_, [&](const auto& f) {
    return std::none_of(all.begin(), all.end(), [&](const auto& i) { return i.name == f.first; });
  });
  for (const auto& iface : all) {
    if (!filter_.passes(iface.name)) continue;
    any = true;
    for (const auto& c : kCounterColumns)
      sink.emit(c.counter, {iface.name}, static_cast<double>(iface.counters[c.column]));

    auto file = speed_.find(iface.name);
    if (file == speed_.end())
      file =
          speed_.emplace(iface.name, kiwi::join_path(sysfs_, "class/net/" + iface.name + "/speed"))
              .first;
    // Absent on some virtual devices, EINVAL on Wi-Fi and on links that are down: all of these
    // mean "unknown", which is normal and not worth a note.
    const auto text = file->second.read_if_readable();
    const auto speed = text ? parse_link_speed(*text) : std::nullopt;
    if (!speed) continue;
    sink.emit(kSpeed, {iface.name}, *speed);
    const std::pair<double, double> bytes{static_cast<double>(iface.counters[kReceiveBytes]),
                                          static_cast<double>(iface.counters[kTransmitBytes])};
    now.bytes.emplace(iface.name, bytes);
    if (!clocked) continue;
    auto before = previous_->bytes.find(iface.name);
    if (before == previous_->bytes.end()) continue;  // its first reading with a speed
    // Full duplex: each direction has the whole link, so the busier one is the utilisation.
    // Clamped because two readings taken a little apart can exceed the line rate by a hair. The
    // same rule as the agent's rates (kiwi/rates.hpp): none across a reset.
    const auto rx = kiwi::counter_rate(before->second.first, bytes.first, elapsed);
    const auto tx = kiwi::counter_rate(before->second.second, bytes.second, elapsed);
    if (rx && tx) sink.emit(kUtilisation, {iface.name}, std::min(std::max(*rx, *tx) / *speed, 1.0));
  }
  previous_ = std::move(now);
  // Wi-Fi: absent without a wireless interface (or cfg80211's wireless extensions); a read that
  // fails is a note, the counters stand.
  try {
    if (any && wireless_.read_into(wireless_text_))
      for (const auto& w : parse_net_wireless(wireless_text_)) {
        if (!filter_.passes(w.name)) continue;
        if (w.quality) sink.emit(kWirelessQuality, {w.name}, *w.quality);
        if (w.level_dbm) sink.emit(kWirelessSignal, {w.name}, *w.level_dbm);
        if (w.noise_dbm) sink.emit(kWirelessNoise, {w.name}, *w.noise_dbm);
      }
  } catch (const std::exception& e) {
    add_note(std::string("no Wi-Fi levels: ") + e.what());
  }
  if (!any)
    return kiwi::SampleResult::no_data(
        all.empty() && dev.skipped ? note : "no interfaces left after include and exclude");
  return kiwi::SampleResult::ok(note);
}

}  // namespace kiwi::network
