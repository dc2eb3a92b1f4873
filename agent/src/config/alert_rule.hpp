// An [[alert]] rule's summary template (docs/alerts.md). The configuration checks it when it
// reads the rule (AlertRule, config.hpp), so a rule that loads is one the engine (alert/) runs.
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/config.hpp"

namespace kiwi::agent {

// A summary template: text with {{placeholders}}: value, value_percent (x 100), threshold,
// threshold_percent, name, series, sensor, severity, message (the sensor's), labels.<label>. Pieces
// in order; `placeholder` pieces hold the name.
struct TemplatePiece {
  bool placeholder = false;
  std::string text;
};
// The pieces, or why the template is refused ("unknown placeholder {{x}}; accepted: ...").
std::variant<std::vector<TemplatePiece>, std::string> parse_template(std::string_view text);

// The summary of a rule without one: "<name>: {{series}} is {{value}}" (above/below the
// threshold), or for a status rule "sensor {{sensor}} is <status>".
std::string default_summary(const AlertRule& rule);

}  // namespace kiwi::agent
