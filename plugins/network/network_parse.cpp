#include "network_parse.hpp"

#include <algorithm>
#include <charconv>
#include <kiwi/io.hpp>
#include <kiwi/text.hpp>
#include <stdexcept>

namespace kiwi::network {
NetDev parse_net_dev(std::string_view text) {
  NetDev out;
  for (std::string_view line : Lines(text)) {
    // Header lines ("Inter-|   Receive ...", " face |bytes ...") have a '|' and no name colon.
    std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || line.find('|') != std::string_view::npos) continue;
    InterfaceCounters iface;
    iface.name = std::string(kiwi::trim(line.substr(0, colon)));
    try {
      const std::size_t count = read_counters(line.substr(colon + 1), iface.counters, line);
      if (iface.name.empty() || count < iface.counters.size())
        throw std::invalid_argument("line " + kiwi::quote_excerpt(line) +
                                    ": expected 'name:' and 16 counters");
    } catch (const std::invalid_argument& e) {
      if (out.skipped++ == 0) out.first_skipped = e.what();
      continue;
    }
    out.interfaces.push_back(std::move(iface));
  }
  return out;
}

std::optional<double> parse_link_speed(std::string_view text) {
  auto mbit = to_number<std::int64_t>(kiwi::trim(text));
  if (!mbit || *mbit <= 0) return std::nullopt;
  return static_cast<double>(*mbit) * 1e6 / 8;  // Mb/s is 10^6 bits, as ethtool means it
}

std::vector<Wireless> parse_net_wireless(std::string_view text) {
  std::vector<Wireless> out;
  std::size_t line_no = 0;
  for (const std::string_view line : kiwi::Lines(text)) {
    if (++line_no <= 2) continue;  // the two header lines
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    Wireless w;
    w.name = std::string(kiwi::trim(line.substr(0, colon)));
    std::string_view rest = line.substr(colon + 1);
    if (w.name.empty() || kiwi::next_field(rest).empty()) continue;  // the status word
    // "54." is 54, updated since the last read; "-256" as noise is the wireless extensions'
    // "no noise measured" (0 dBm less 256).
    auto value = [&]() -> std::optional<double> {
      std::string_view f = kiwi::next_field(rest);
      if (!f.empty() && f.back() == '.') f.remove_suffix(1);
      const auto v = kiwi::to_number<long long>(f);
      return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
    };
    w.quality = value();
    w.level_dbm = value();
    w.noise_dbm = value();
    if (!w.quality || !w.level_dbm) continue;
    if (w.noise_dbm == -256) w.noise_dbm.reset();
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace kiwi::network
