// kiwi-agent plugin SDK: the Prometheus name rules and the text format's escaping, in one place
// for the agent's metric check, the exec sensor's parser of the text format and the /metrics
// renderer.
//
// Two sets of name rules, on purpose:
//   - the text exposition format's (what a program may print, what the exec parser reads):
//     metric names [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]*;
//   - the agent's, for what a sensor emits (kiwi/sensor.hpp, MetricSink): no ':' in a metric name
//     (Prometheus keeps the colon for recording rules), and no label name starting with "__"
//     (Prometheus' internal labels, such as __name__). So an exec program that prints
//     `job:errors:rate5m` parses, and the agent then drops that metric and names it.
//
// Escaping, as the text format 0.0.4 defines it: a label value escapes '\', '"' and the newline
// (\\, \", \n); HELP text escapes '\' and the newline only. Nothing else is escaped, and no other
// escape sequence is valid.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace kiwi::prometheus {

// ---- Names -------------------------------------------------------------------------------------

// The characters, for a parser that scans a name in a line. Forced inline: a parser built for size
// (-Os, as the plugins are) would otherwise call one per byte.
[[gnu::always_inline]] constexpr bool is_label_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
[[gnu::always_inline]] constexpr bool is_label_name_char(char c) {
  return is_label_name_start(c) || (c >= '0' && c <= '9');
}
[[gnu::always_inline]] constexpr bool is_metric_name_start(char c) {
  return is_label_name_start(c) || c == ':';
}
[[gnu::always_inline]] constexpr bool is_metric_name_char(char c) {
  return is_label_name_char(c) || c == ':';
}

// The exposition format's metric name: [a-zA-Z_:][a-zA-Z0-9_:]*
constexpr bool is_metric_name(std::string_view name) {
  if (name.empty() || !is_metric_name_start(name[0])) return false;
  for (char c : name.substr(1))
    if (!is_metric_name_char(c)) return false;
  return true;
}

// The exposition format's label name: [a-zA-Z_][a-zA-Z0-9_]* (a leading "__" parses; the agent
// refuses it from a sensor, see is_sensor_label_name).
constexpr bool is_label_name(std::string_view name) {
  if (name.empty() || !is_label_name_start(name[0])) return false;
  for (char c : name.substr(1))
    if (!is_label_name_char(c)) return false;
  return true;
}

// What the agent accepts as a metric name from a sensor: [a-zA-Z_][a-zA-Z0-9_]*, the exposition
// rule without the colon (reserved for recording rules).
constexpr bool is_sensor_metric_name(std::string_view name) {
  return is_label_name(name);
}

// What the agent accepts as a label name from a sensor: the exposition rule, not starting with
// "__" (reserved for Prometheus' internal labels).
constexpr bool is_sensor_label_name(std::string_view name) {
  return is_label_name(name) && !name.starts_with("__");
}

// The name a metric of a sensor is exposed as, in /metrics and remote write, appended to `out`:
// "kiwi_" + its name, and "_total" after a counter's name that lacks it. One namespace for every
// report: the agent keeps one series per exposed name and labels (docs/plugins.md, "Series
// identity").
// Whether that name gets "_total" after it.
constexpr bool exposed_with_total(std::string_view name, bool counter) {
  return counter && !name.ends_with("_total");
}
inline void append_exposed_name(std::string& out, std::string_view name, bool counter) {
  out += "kiwi_";
  out += name;
  if (exposed_with_total(name, counter)) out += "_total";
}

// ---- Histograms and summaries ------------------------------------------------------------------
// A histogram or summary family is exposed as its series (kiwi/plugin.h, KIWI_HISTOGRAM):
// <family>_bucket{le="..."}, <family>_sum, <family>_count; <family>{quantile="..."}, <family>_sum,
// <family>_count. The agent keeps each series under its own name, as Prometheus stores them.

// The label that tells a histogram's buckets or a summary's quantiles apart.
constexpr std::string_view part_label(bool histogram) {
  return histogram ? "le" : "quantile";
}

// A series of such a family: the family's name and what the series' name adds to it ("_bucket",
// "_sum", "_count", or "" for a summary's quantile).
struct FamilyPart {
  std::string_view family;
  std::string_view suffix;
};

// The family and part of a histogram's (`histogram`) or a summary's series named `name`, given
// whether it has the part label (le, quantile): nullopt where the name does not fit its kind.
constexpr std::optional<FamilyPart> family_part(std::string_view name, bool histogram,
                                                bool has_part_label) {
  auto split = [name](std::string_view suffix) -> std::optional<FamilyPart> {
    if (name.size() <= suffix.size() || !name.ends_with(suffix)) return std::nullopt;
    return FamilyPart{name.substr(0, name.size() - suffix.size()), suffix};
  };
  if (has_part_label) return histogram ? split("_bucket") : FamilyPart{name, ""};
  if (auto sum = split("_sum")) return sum;
  return split("_count");
}

// Whether `labels` (pairs or kiwi::Label, any order) has one named `name`.
template <class Labels>
constexpr bool has_label(const Labels& labels, std::string_view name) {
  for (const auto& l : labels) {
    if constexpr (requires { l.first; }) {
      if (l.first == name) return true;
    } else {
      if (l.name == name) return true;
    }
  }
  return false;
}

// family_part() of a series with these labels (whether its part label is among them).
template <class Labels>
constexpr std::optional<FamilyPart> family_part_of(std::string_view name, bool histogram,
                                                   const Labels& labels) {
  return family_part(name, histogram, has_label(labels, part_label(histogram)));
}

// ---- Escaping ----------------------------------------------------------------------------------

namespace detail {
// Appends `v` with '\' and the newline escaped, and '"' when `quotes`. The runs between escapes
// go in with one append each.
inline void append_escaped(std::string& out, std::string_view v, bool quotes) {
  std::size_t run = 0;  // start of the run not appended yet
  for (std::size_t i = 0; i < v.size(); ++i) {
    const char c = v[i];
    if (c != '\\' && c != '\n' && (c != '"' || !quotes)) continue;
    out.append(v.data() + run, i - run);
    out += c == '\n' ? "\\n" : c == '"' ? "\\\"" : "\\\\";
    run = i + 1;
  }
  out.append(v.data() + run, v.size() - run);
}
}  // namespace detail

// Appends a label value as it goes between the quotes: \\, \" and \n.
inline void append_escaped_label_value(std::string& out, std::string_view value) {
  detail::append_escaped(out, value, true);
}
// Appends HELP text: \\ and \n (a quote stays as it is).
inline void append_escaped_help(std::string& out, std::string_view help) {
  detail::append_escaped(out, help, false);
}
inline std::string escape_label_value(std::string_view value) {
  std::string out;
  append_escaped_label_value(out, value);
  return out;
}
inline std::string escape_help(std::string_view help) {
  std::string out;
  append_escaped_help(out, help);
  return out;
}

// How read_label_value() stopped.
struct LabelValueRead {
  enum class Stop {
    quote,       // at the closing '"': `at` is its offset
    end,         // at the end of the text, no closing '"' (`at` is the text's size)
    bad_escape,  // at a '\' not followed by '\', '"' or 'n' (or by nothing): `at` is its offset
  };
  Stop stop;
  std::size_t at;
};

// Reads a label value as the text format writes it, from just after its opening '"' up to its
// closing one, appending the unescaped bytes to `out` (up to where it stopped).
inline LabelValueRead read_label_value(std::string_view text, std::string& out) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') return {LabelValueRead::Stop::quote, i};
    if (c != '\\') {
      out += c;  // byte by byte: values are short, and a push is cheaper than an append
      continue;
    }
    const char e = i + 1 < text.size() ? text[i + 1] : '\0';
    if (e == '\\' || e == '"')
      out += e;
    else if (e == 'n')
      out += '\n';
    else
      return {LabelValueRead::Stop::bad_escape, i};
    ++i;
  }
  return {LabelValueRead::Stop::end, text.size()};
}

// A whole escaped label value (the text between its quotes) unescaped; nullopt when it holds an
// invalid escape or an unescaped '"'.
inline std::optional<std::string> unescape_label_value(std::string_view escaped) {
  std::string out;
  if (read_label_value(escaped, out).stop != LabelValueRead::Stop::end) return std::nullopt;
  return out;
}

// The offset of the first invalid escape in HELP text (a '\' not followed by '\' or 'n'), or
// std::string_view::npos when there is none.
constexpr std::size_t find_bad_help_escape(std::string_view help) {
  for (std::size_t i = 0; i < help.size(); ++i)
    if (help[i] == '\\') {
      if (i + 1 >= help.size() || (help[i + 1] != '\\' && help[i + 1] != 'n')) return i;
      ++i;
    }
  return std::string_view::npos;
}

// Escaped HELP text unescaped; nullopt when it holds an invalid escape.
inline std::optional<std::string> unescape_help(std::string_view escaped) {
  if (find_bad_help_escape(escaped) != std::string_view::npos) return std::nullopt;
  std::string out;
  out.reserve(escaped.size());
  for (std::size_t i = 0; i < escaped.size(); ++i) {
    if (escaped[i] != '\\') {
      out += escaped[i];
      continue;
    }
    out += escaped[++i] == 'n' ? '\n' : '\\';
  }
  return out;
}

}  // namespace kiwi::prometheus
