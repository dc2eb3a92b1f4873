// Pure functions for the network sensor: /proc/net/dev and sysfs link speed text, counter rates.
// No file I/O here, so every function is tested on fixture text (tests/unit/sensors/).
#pragma once

#include <array>
#include <cstdint>
#include <kiwi/plugin.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiwi::network {

// The 16 counters after "name:" in /proc/net/dev, in kernel order: receive bytes packets errs drop
// fifo frame compressed multicast, then transmit bytes packets errs drop fifo colls carrier
// compressed.
using Counters = std::array<std::uint64_t, 16>;

// One rate metric per /proc/net/dev column we report, declared once: the sensor emits through
// these rows and kMetricSpecs (network_sensor.hpp) is made of them. The one table the sensor, the
// tests and the README follow: adding a metric is a row here.
struct RateColumn {
  kiwi::MetricSpec metric;
  std::size_t column;  // index into Counters
};
constexpr RateColumn rate(std::string_view name, kiwi::Unit unit, std::size_t column,
                          std::string_view help) {
  return {kiwi::gauge(name, unit, "interface", help), column};
}
inline constexpr RateColumn kRateColumns[] = {
    rate("network_receive_bytes_per_second", kiwi::Unit::bytes_per_second, 0,
         "bytes received per second since the last sample (/proc/net/dev)"),
    rate("network_transmit_bytes_per_second", kiwi::Unit::bytes_per_second, 8,
         "bytes sent per second since the last sample (/proc/net/dev)"),
    rate("network_receive_packets_per_second", kiwi::Unit::per_second, 1,
         "packets received per second (/proc/net/dev)"),
    rate("network_transmit_packets_per_second", kiwi::Unit::per_second, 9,
         "packets sent per second (/proc/net/dev)"),
    rate("network_receive_errors_per_second", kiwi::Unit::per_second, 2,
         "receive errors per second (/proc/net/dev errs)"),
    rate("network_transmit_errors_per_second", kiwi::Unit::per_second, 10,
         "transmit errors per second (/proc/net/dev errs)"),
    rate("network_receive_drops_per_second", kiwi::Unit::per_second, 3,
         "received packets dropped per second (/proc/net/dev drop)"),
    rate("network_transmit_drops_per_second", kiwi::Unit::per_second, 11,
         "packets dropped on send per second (/proc/net/dev drop)"),
};
// Positions in kRateColumns of the two byte rates, which utilisation is computed from.
inline constexpr std::size_t kReceiveBytesRate = 0;
inline constexpr std::size_t kTransmitBytesRate = 1;
static_assert(kRateColumns[kReceiveBytesRate].column == 0 &&
              kRateColumns[kTransmitBytesRate].column == 8);

struct InterfaceCounters {
  std::string name;
  Counters counters{};
};

// Parses /proc/net/dev: the two header lines are skipped, every "name: 16 numbers" line is kept in
// file order. Very old kernels glue a wide number to the colon ("eth0:1234567890 ..."), which is
// accepted. Throws std::invalid_argument naming the line if a line has fewer than 16 numbers or a
// field that is not a number.
std::vector<InterfaceCounters> parse_net_dev(std::string_view text);

// Parses <sysfs>/class/net/<if>/speed (Mb/s) into bytes per second. nullopt for -1 (the kernel's
// SPEED_UNKNOWN: link down, virtio), 0 and anything that is not a number.
std::optional<double> parse_link_speed(std::string_view text);

// Per-second rates of one interface between two readings, in kRateColumns order. nullopt if any
// counter went backwards (a driver reload or a re-created interface resets them all; a driver with
// 32-bit counters wraps) or elapsed_seconds is not positive: no rate beats a garbage one.
using Rates = std::array<double, std::size(kRateColumns)>;
std::optional<Rates> compute_rates(const Counters& before, const Counters& after,
                                   double elapsed_seconds);

}  // namespace kiwi::network
