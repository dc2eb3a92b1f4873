#include "config/alert_rule.hpp"

namespace kiwi::agent {

namespace {

constexpr std::string_view kPlaceholders[] = {
    "value",  "value_percent", "threshold", "threshold_percent", "name", "series",
    "sensor", "severity",      "message"};

bool known(std::string_view name) {
  if (name.starts_with("labels.")) return name.size() > 7;
  for (auto p : kPlaceholders)
    if (p == name) return true;
  return false;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

}  // namespace

std::variant<std::vector<TemplatePiece>, std::string> parse_template(std::string_view text) {
  std::vector<TemplatePiece> out;
  std::size_t at = 0;
  while (at < text.size()) {
    const auto open = text.find("{{", at);
    if (open == std::string_view::npos) {
      out.push_back({false, std::string(text.substr(at))});
      break;
    }
    if (open > at) out.push_back({false, std::string(text.substr(at, open - at))});
    const auto close = text.find("}}", open + 2);
    if (close == std::string_view::npos)
      return "\"{{\" at character " + std::to_string(open + 1) + " is not closed with \"}}\"";
    const std::string_view name = trim(text.substr(open + 2, close - open - 2));
    if (!known(name))
      return "unknown placeholder {{" + std::string(name) +
             "}}; accepted: {{value}}, {{value_percent}}, {{threshold}}, {{threshold_percent}}, "
             "{{name}}, {{series}}, {{sensor}}, {{severity}}, {{message}}, {{labels.<label>}}";
    out.push_back({true, std::string(name)});
    at = close + 2;
  }
  return out;
}

std::string default_summary(const AlertRule& rule) {
  if (!rule.status.empty()) return "sensor {{sensor}} is " + rule.status + ": {{message}}";
  const char* way = rule.above ? " above " : " below ";
  return rule.name + ": {{series}}" + (rule.rate ? " rate" : "") + " is {{value}}" + way +
         "{{threshold}}";
}

}  // namespace kiwi::agent
