// Prometheus text exposition format 0.0.4 of a snapshot and the agent's counters. Pure.
#pragma once

#include <kiwi/handler.hpp>
#include <string>

namespace kiwi_metrics {

// Every sensor metric as kiwi_<name> (counters end in _total), grouped into families with HELP and
// TYPE, then the agent's self-metrics. A series that two sensor instances both emit is kept once.
std::string render(const kiwi::Snapshot& snapshot, const kiwi::AgentStats& stats);

// Exposition-format escaping: label values (\\, \", \n) and HELP text (\\, \n).
std::string escape_label_value(std::string_view v);
std::string escape_help(std::string_view v);
// Shortest exact text of a sample value; NaN, +Inf, -Inf as Prometheus spells them.
std::string format_value(double v);

}  // namespace kiwi_metrics
