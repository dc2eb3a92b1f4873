#include "network_sensor.hpp"

#include <algorithm>
#include <kiwi/io.hpp>
#include <kiwi/rates.hpp>
#include <stdexcept>
#include <system_error>

namespace kiwi::network {
namespace {

// Link speed in bytes per second, or nullopt. The file is absent on some virtual devices and
// read() fails with EINVAL on Wi-Fi and on links that are down: all of these mean "unknown", which
// is normal and not worth a note.
std::optional<double> read_speed(const std::string& path) {
  if (auto text = kiwi::read_file_if_readable(path)) return parse_link_speed(*text);
  return std::nullopt;
}

}  // namespace

NetworkSensor::NetworkSensor(const kiwi::SensorContext& ctx)
    : procfs_(ctx.procfs),
      sysfs_(ctx.sysfs),
      filter_(ctx.options.get_strings("include"), ctx.options.get_strings("exclude")),
      log_(ctx.log) {}

kiwi::SampleResult NetworkSensor::sample(kiwi::MetricSink& sink) {
  const std::string dev_path = kiwi::join_path(procfs_, "net/dev");
  const std::string dev_text = kiwi::read_required_file(dev_path);
  const std::int64_t uptime_ms = kiwi::read_uptime_ms(procfs_);
  const auto all = kiwi::parse_file(dev_path, [&] { return parse_net_dev(dev_text); });

  Reading now{uptime_ms, {}};
  std::vector<std::string> notes;
  const std::optional<double> elapsed = kiwi::rate_interval_seconds(
      previous_ ? std::optional(previous_->uptime_ms) : std::nullopt, now.uptime_ms, notes);

  std::vector<std::string> backwards;
  for (const auto& iface : all) {
    if (!filter_.passes(iface.name)) continue;
    now.interfaces.emplace(iface.name, iface.counters);

    // Rates: all of an interface's or none (see compute_rates). A counter going back means this
    // interval is unknown; the new reading is the baseline the next interval is measured from.
    std::optional<Rates> rates;
    if (elapsed) {
      auto before = previous_->interfaces.find(iface.name);
      if (before != previous_->interfaces.end()) {  // else it just appeared: this is its baseline
        rates = compute_rates(before->second, iface.counters, *elapsed);
        if (!rates) backwards.push_back(iface.name);
      }
    }
    if (rates)
      for (std::size_t i = 0; i < rates->size(); ++i)
        sink.emit(kRateColumns[i].metric, {iface.name}, (*rates)[i]);

    const auto speed = read_speed(kiwi::join_path(sysfs_, "class/net/" + iface.name + "/speed"));
    if (!speed) continue;
    sink.emit(kSpeed, {iface.name}, *speed);
    if (rates) {
      // Full duplex: each direction has the whole link, so the busier one is the utilisation.
      // Clamped because two readings taken a little apart can exceed the line rate by a hair.
      const double busiest = std::max((*rates)[kReceiveBytesRate], (*rates)[kTransmitBytesRate]);
      sink.emit(kUtilisation, {iface.name}, std::min(busiest / *speed, 1.0));
    }
  }
  if (!backwards.empty()) {
    notes.push_back(
        "counters went backwards (driver reset or interface re-created), no rates for " +
        join(backwards, ", "));
    log_.info(notes.back());
  }
  const bool none = now.interfaces.empty();
  previous_ = std::move(now);
  if (none) return kiwi::SampleResult::no_data("no interfaces left after include and exclude");
  return kiwi::SampleResult::ok(join(notes, "; "));
}

}  // namespace kiwi::network
