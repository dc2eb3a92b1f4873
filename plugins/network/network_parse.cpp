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

}  // namespace kiwi::network
