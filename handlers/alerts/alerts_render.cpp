#include "alerts_render.hpp"

#include <algorithm>
#include <kiwi/json.hpp>

namespace kiwi_alerts {

namespace {

constexpr std::string_view kAccepted[] = {"state", "severity"};

constexpr std::pair<std::string_view, kiwi::AlertState> kStates[] = {
    {"firing", kiwi::AlertState::firing},
    {"pending", kiwi::AlertState::pending},
    {"resolved", kiwi::AlertState::resolved}};
constexpr std::pair<std::string_view, kiwi::Severity> kSeverities[] = {
    {"critical", kiwi::Severity::critical},
    {"warning", kiwi::Severity::warning},
    {"info", kiwi::Severity::info}};

std::uint32_t bit(auto code) {
  return 1u << static_cast<std::uint32_t>(code);
}

// The bits of the words of a comma list `value` of parameter `name`, each one of `words`.
template <class Code, std::size_t N>
std::variant<std::uint32_t, ParamError> parse_list(
    std::string_view name, std::string_view value,
    const std::pair<std::string_view, Code> (&words)[N], std::string_view accepted) {
  std::uint32_t bits = 0;
  while (true) {
    const auto comma = value.find(',');
    const std::string_view item = value.substr(0, comma);
    if (item.empty()) return ParamError{std::string(name), "empty item in the list"};
    const auto* found = std::find_if(std::begin(words), std::end(words),
                                     [&](const auto& w) { return w.first == item; });
    if (found == std::end(words))
      return ParamError{std::string(name), "'" + std::string(item) + "' is not a " +
                                               std::string(name) + "; use " +
                                               std::string(accepted) + " (a comma list)"};
    bits |= bit(found->second);
    if (comma == std::string_view::npos) return bits;
    value.remove_prefix(comma + 1);
  }
}

// The /api/current way of writing a time: unix seconds; none (0) as null.
void append_time(std::string& out, double t) {
  if (t > 0)
    kiwi::append_json_number(out, t);
  else
    out += "null";
}

}  // namespace

bool Filter::matches(const kiwi::Alert& a) const {
  return (states & bit(a.state)) && (severities & bit(a.severity));
}

std::variant<Filter, ParamError> parse_filter(const kiwi::Request& req) {
  for (auto& p : req.query) {
    if (std::find(std::begin(kAccepted), std::end(kAccepted), p.name) == std::end(kAccepted))
      return ParamError{std::string(p.name), "unknown parameter; accepted: state, severity"};
    if (req.count(p.name) > 1) return ParamError{std::string(p.name), "given more than once"};
    if (p.value.empty())
      return ParamError{std::string(p.name), "is empty; give a value or leave the parameter out"};
  }
  Filter f;
  if (auto v = req.param("state")) {
    auto bits = parse_list("state", *v, kStates, "firing, pending or resolved");
    if (auto* e = std::get_if<ParamError>(&bits)) return std::move(*e);
    f.states = std::get<std::uint32_t>(bits);
  }
  if (auto v = req.param("severity")) {
    auto bits = parse_list("severity", *v, kSeverities, "critical, warning or info");
    if (auto* e = std::get_if<ParamError>(&bits)) return std::move(*e);
    f.severities = std::get<std::uint32_t>(bits);
  }
  return f;
}

std::string render(const std::vector<kiwi::Alert>& alerts, const Filter& filter, double timestamp) {
  std::size_t firing = 0, pending = 0;
  for (const auto& a : alerts) {
    firing += a.state == kiwi::AlertState::firing;
    pending += a.state == kiwi::AlertState::pending;
  }
  std::string out = "{\"version\":1,\"timestamp\":";
  append_time(out, timestamp);
  out += ",\"firing\":";
  kiwi::append_json_integer(out, static_cast<std::uint64_t>(firing));
  out += ",\"pending\":";
  kiwi::append_json_integer(out, static_cast<std::uint64_t>(pending));
  out += ",\"alerts\":[";
  bool first = true;
  for (const auto& a : alerts) {
    if (!filter.matches(a)) continue;
    if (!first) out += ',';
    first = false;
    out += "{\"name\":";
    kiwi::append_json_string(out, a.name);
    out += ",\"state\":";
    kiwi::append_json_string(out, kiwi::to_string(a.state));
    out += ",\"severity\":";
    kiwi::append_json_string(out, kiwi::to_string(a.severity));
    out += ",\"summary\":";
    kiwi::append_json_string(out, a.summary);
    out += ",\"labels\":{";
    for (std::size_t i = 0; i < a.labels.size(); ++i) {
      if (i) out += ',';
      kiwi::append_json_string(out, a.labels[i].first);
      out += ':';
      kiwi::append_json_string(out, a.labels[i].second);
    }
    out += "},\"sensor\":";
    kiwi::append_json_string(out, a.sensor);
    out += ",\"series\":";
    kiwi::append_json_string(out, a.series);
    out += ",\"value\":";
    kiwi::append_json_number(out, a.value);  // NaN: null
    out += ",\"threshold\":";
    kiwi::append_json_number(out, a.threshold);
    out += ",\"since\":";
    append_time(out, a.since);
    out += ",\"active_at\":";
    append_time(out, a.active_at);
    out += '}';
  }
  out += "]}";
  return out;
}

}  // namespace kiwi_alerts
