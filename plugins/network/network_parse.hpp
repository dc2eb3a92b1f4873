// Pure functions for the network sensor: /proc/net/dev and sysfs link speed text.
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

// One counter per /proc/net/dev column we report, with the per-second rate the agent derives from
// it (kiwi/plugin.hpp, MetricSpec::rate), declared once: the sensor emits the counters through
// these rows and kMetricSpecs (network_sensor.hpp) is made of them. The one table the sensor, the
// tests and the README follow: adding a metric is a row here.
struct CounterColumn {
  kiwi::MetricSpec counter;  // what the kernel counts, since the interface appeared
  kiwi::MetricSpec rate;     // its rate, derived by the agent between two samples
  std::size_t column;        // index into Counters
};
constexpr CounterColumn column(std::string_view counter, kiwi::Unit unit, std::size_t column,
                               std::string_view counter_help, std::string_view rate,
                               std::string_view rate_help) {
  return {kiwi::counter(counter, unit, "interface", counter_help, rate),
          kiwi::gauge(rate, *kiwi::rate_unit(unit), "interface", rate_help), column};
}
inline constexpr CounterColumn kCounterColumns[] = {
    column("network_receive_bytes_total", kiwi::Unit::bytes, 0,
           "bytes received since the interface appeared (/proc/net/dev)",
           "network_receive_bytes_per_second",
           "bytes received per second since the last sample (/proc/net/dev)"),
    column("network_transmit_bytes_total", kiwi::Unit::bytes, 8,
           "bytes sent since the interface appeared (/proc/net/dev)",
           "network_transmit_bytes_per_second",
           "bytes sent per second since the last sample (/proc/net/dev)"),
    column("network_receive_packets_total", kiwi::Unit::count, 1,
           "packets received (/proc/net/dev)", "network_receive_packets_per_second",
           "packets received per second (/proc/net/dev)"),
    column("network_transmit_packets_total", kiwi::Unit::count, 9, "packets sent (/proc/net/dev)",
           "network_transmit_packets_per_second", "packets sent per second (/proc/net/dev)"),
    column("network_receive_errors_total", kiwi::Unit::count, 2,
           "receive errors (/proc/net/dev errs)", "network_receive_errors_per_second",
           "receive errors per second (/proc/net/dev errs)"),
    column("network_transmit_errors_total", kiwi::Unit::count, 10,
           "transmit errors (/proc/net/dev errs)", "network_transmit_errors_per_second",
           "transmit errors per second (/proc/net/dev errs)"),
    column("network_receive_drops_total", kiwi::Unit::count, 3,
           "received packets dropped (/proc/net/dev drop)", "network_receive_drops_per_second",
           "received packets dropped per second (/proc/net/dev drop)"),
    column("network_transmit_drops_total", kiwi::Unit::count, 11,
           "packets dropped on send (/proc/net/dev drop)", "network_transmit_drops_per_second",
           "packets dropped on send per second (/proc/net/dev drop)"),
};
// The columns of the two byte counters, which utilisation is computed from.
inline constexpr std::size_t kReceiveBytes = 0;
inline constexpr std::size_t kTransmitBytes = 8;

struct InterfaceCounters {
  std::string name;
  Counters counters{};
};

struct NetDev {
  std::vector<InterfaceCounters> interfaces;
  std::size_t skipped = 0;    // lines that are not "name: 16 numbers"
  std::string first_skipped;  // the first of them and what is wrong with it
};

// Parses /proc/net/dev: the two header lines are skipped, every "name: 16 numbers" line is kept in
// file order. Very old kernels glue a wide number to the colon ("eth0:1234567890 ..."), which is
// accepted. A line with fewer than 16 numbers or a field that is not a number is skipped and
// counted, the first one named: the other interfaces' counters are kept.
NetDev parse_net_dev(std::string_view text);

// One interface of /proc/net/wireless (the wireless extensions' table, which cfg80211 drivers
// fill too): link quality as the driver states it (most count out of 70), signal and noise level
// in dBm. nullopt where the driver gives none (noise -256: none measured).
struct Wireless {
  std::string name;
  std::optional<double> quality, level_dbm, noise_dbm;
};

// Parses /proc/net/wireless: the two header lines are skipped, each "name: status quality level
// noise ..." line is kept in file order (the kernel marks a value updated since the last read
// with a '.', which is dropped). A line that is not such is skipped.
std::vector<Wireless> parse_net_wireless(std::string_view text);

// Parses <sysfs>/class/net/<if>/speed (Mb/s) into bytes per second. nullopt for -1 (the kernel's
// SPEED_UNKNOWN: link down, virtio), 0 and anything that is not a number.
std::optional<double> parse_link_speed(std::string_view text);

}  // namespace kiwi::network
