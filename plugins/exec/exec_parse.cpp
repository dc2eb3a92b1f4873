#include "exec_parse.hpp"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <charconv>
#include <cmath>
#include <kiwi/io.hpp>
#include <kiwi/prometheus.hpp>
#include <kiwi/text.hpp>
#include <limits>
#include <map>
#include <set>

namespace kiwi::exec {

std::string ParseError::str() const {
  if (line == 0) return (where.empty() ? "output" : "output " + where) + ": " + message;
  return "output line " + std::to_string(line) + ", column " + std::to_string(column) + ": " +
         message;
}

std::string unit_from_name(std::string_view name, bool counter) {
  if (counter && name.ends_with("_total")) name.remove_suffix(6);
  // Longest first: "_bytes_per_second" also ends in "_per_second".
  static constexpr std::pair<std::string_view, std::string_view> kSuffixes[] = {
      {"_bytes_per_second", "bytes_per_second"},
      {"_per_second", "per_second"},
      {"_bytes", "bytes"},
      {"_seconds", "seconds"},
      {"_celsius", "celsius"},
      {"_hertz", "hertz"},
      {"_ratio", "ratio"},
      {"_volts", "volts"},
      {"_amperes", "amperes"},
      {"_watts", "watts"},
      {"_rpm", "rpm"},
  };
  for (const auto& [suffix, unit] : kSuffixes)
    if (name.ends_with(suffix)) return std::string(unit);
  return "";
}

namespace {

// ---------------------------------------------------------------------------------------------
// Prometheus text format

enum class Type { untyped, counter, gauge, histogram, summary };

// The exposition format's name rules (kiwi/prometheus.hpp): a colon in a metric name parses here;
// the agent's check then drops such a metric and names it, as it does any sensor's.
using prometheus::is_label_name_char;
using prometheus::is_label_name_start;
using prometheus::is_metric_name_char;
using prometheus::is_metric_name_start;

bool blank(char c) {
  return c == ' ' || c == '\t';
}

// Whether `s` is well-formed UTF-8 (the format requires it of label values and HELP text).
bool valid_utf8(std::string_view s) {
  return kiwi::is_valid_utf8(s);
}

// What the program printed, quoted for a message: at most 100 bytes, escaped (kiwi/io.hpp).
std::string excerpt(std::string_view s) {
  return kiwi::quote_excerpt(s, 100, '"');
}
std::string excerpt(char c) {
  return kiwi::quote_excerpt(std::string_view(&c, 1), 100, '\'');
}

// A float as Prometheus' own text parser reads it: Go's strconv.ParseFloat, but refusing 'p', 'P'
// and '_' (prometheus/common expfmt parseFloat), so decimal only ("1", "-1.5e3", ".5", "5."),
// and NaN, Inf, Infinity in any case with an optional sign. Out of range is an error, as it is
// for ParseFloat.
std::optional<double> parse_go_float(std::string_view s) {
  if (s.empty()) return std::nullopt;
  bool negative = false;
  std::string_view body = s;
  if (body[0] == '+' || body[0] == '-') {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  auto iequals = [](std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if ((a[i] | 0x20) != b[i]) return false;
    return true;
  };
  if (iequals(body, "inf") || iequals(body, "infinity"))
    return negative ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::infinity();
  if (iequals(body, "nan")) return std::numeric_limits<double>::quiet_NaN();
  // from_chars also reads "inf", "nan(...)" and a second sign; none of those get this far.
  if (body.empty() || body[0] == '+' || body[0] == '-') return std::nullopt;
  for (char c : body)
    if (!(c >= '0' && c <= '9') && c != '.' && c != 'e' && c != 'E' && c != '+' && c != '-')
      return std::nullopt;
  double v = 0;
  const auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), v);
  if (ec != std::errc() || end != body.data() + body.size()) return std::nullopt;
  return negative ? -v : v;
}

// HELP text as the format escapes it (\\ and \n, checked before) made plain.
std::string unescape_help(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size())
      out += s[++i] == 'n' ? '\n' : s[i];
    else
      out += s[i];
  }
  return out;
}

struct Family {
  Type type = Type::untyped;
  bool typed = false;   // a TYPE line was seen
  bool helped = false;  // a HELP line was seen
  bool sampled = false;
};

class PromParser {
 public:
  explicit PromParser(std::string_view text) : text_(text) {}

  Parsed run() {
    Parsed out;
    help_ = &out.help;
    Lines lines(text_);
    while (!error_) {
      const auto line = lines.next();
      if (!line) break;
      line_no_ = lines.number();
      line_ = *line;
      pos_ = 0;
      parse_line(out.metrics);
    }
    if (error_) {
      out.metrics.clear();
      out.help.clear();
      out.error = std::move(error_);
    }
    return out;
  }

 private:
  void fail(std::size_t column0, std::string message) {
    if (!error_) error_ = ParseError{line_no_, column0 + 1, "", std::move(message)};
  }
  bool at_end() const { return pos_ >= line_.size(); }
  char peek() const { return at_end() ? '\0' : line_[pos_]; }
  void skip_blanks() {
    while (!at_end() && blank(line_[pos_])) ++pos_;
  }
  std::string_view token() {  // up to the next blank or the end of the line
    const std::size_t from = pos_;
    while (!at_end() && !blank(line_[pos_])) ++pos_;
    return line_.substr(from, pos_ - from);
  }
  // A metric name at pos_, or an error there.
  std::optional<std::string_view> metric_name(const char* what) {
    const std::size_t from = pos_;
    if (at_end() || !is_metric_name_start(line_[pos_])) {
      fail(from, std::string("expected a metric name") + what);
      return std::nullopt;
    }
    while (!at_end() && is_metric_name_char(line_[pos_])) ++pos_;
    return line_.substr(from, pos_ - from);
  }

  void parse_line(std::vector<Metric>& metrics) {
    if (!line_.empty() && line_.back() == '\r') line_.remove_suffix(1);
    skip_blanks();
    if (at_end()) return;  // blank line
    if (peek() == '#') {
      ++pos_;
      comment();
      return;
    }
    sample(metrics);
  }

  void comment() {
    skip_blanks();
    const std::string_view keyword = token();
    if (keyword != "HELP" && keyword != "TYPE") return;  // any other comment
    skip_blanks();
    const char* what = keyword == "HELP" ? " after HELP" : " after TYPE";
    auto name = metric_name(what);
    if (!name) return;
    if (!at_end() && !blank(peek())) {
      fail(pos_, "invalid character " + excerpt(peek()) + " in metric name");
      return;
    }
    Family& f = families_[std::string(*name)];
    skip_blanks();
    if (keyword == "HELP") {
      if (f.helped) return fail(0, "second HELP line for " + std::string(*name));
      f.helped = true;
      const std::size_t help_at = pos_;
      const std::size_t bad = prometheus::find_bad_help_escape(line_.substr(help_at));
      if (bad != std::string_view::npos)
        return fail(help_at + bad, "invalid escape sequence in HELP text (only \\\\ and \\n)");
      if (!valid_utf8(line_.substr(help_at))) return fail(help_at, "HELP text is not UTF-8");
      help_->emplace_back(*name, unescape_help(line_.substr(help_at)));
      return;
    }
    const std::size_t type_at = pos_;
    const std::string_view word = token();
    static const std::map<std::string_view, Type> kTypes = {{"counter", Type::counter},
                                                            {"gauge", Type::gauge},
                                                            {"histogram", Type::histogram},
                                                            {"summary", Type::summary},
                                                            {"untyped", Type::untyped}};
    const auto t = kTypes.find(word);
    if (word.empty()) return fail(type_at, "TYPE line for " + std::string(*name) + " has no type");
    if (t == kTypes.end())
      return fail(type_at, "unknown metric type " + excerpt(word) +
                               " (counter, gauge, histogram, summary or untyped)");
    skip_blanks();
    if (!at_end()) return fail(pos_, "unexpected text after the metric type");
    if (f.typed) return fail(0, "second TYPE line for " + std::string(*name));
    if (f.sampled) return fail(0, "TYPE line for " + std::string(*name) + " after its samples");
    f.typed = true;
    f.type = t->second;
  }

  // The family a sample belongs to, and how kiwi keeps it.
  void classify(std::string_view name, Metric& m) {
    auto typed = [&](std::string_view n) -> Family* {
      const auto it = families_.find(std::string(n));
      return it != families_.end() && it->second.typed ? &it->second : nullptr;
    };
    if (Family* f = typed(name)) {
      f->sampled = true;
      if (f->type == Type::counter) {
        m.kind = MetricKind::counter;
        m.unit = unit_from_name(name, true);
      } else {
        // gauge, untyped, and a summary's quantile samples (named as the family)
        if (f->type == Type::summary) m.kind = MetricKind::summary;
        m.unit = unit_from_name(name, false);
      }
      return;
    }
    for (std::string_view suffix : {"_bucket", "_sum", "_count"}) {
      if (!name.ends_with(suffix)) continue;
      const std::string_view base = name.substr(0, name.size() - suffix.size());
      Family* f = typed(base);
      if (!f || (f->type != Type::histogram && f->type != Type::summary)) continue;
      if (f->type == Type::summary && suffix == "_bucket") continue;
      f->sampled = true;
      m.kind = f->type == Type::histogram ? MetricKind::histogram : MetricKind::summary;
      m.unit = suffix == "_sum" ? unit_from_name(base, false) : "";
      return;
    }
    families_[std::string(name)].sampled = true;  // untyped
    m.unit = unit_from_name(name, false);
  }

  void sample(std::vector<Metric>& metrics) {
    auto name = metric_name("");
    if (!name) return;
    Metric m;
    m.name = std::string(*name);
    if (peek() == '{') {
      ++pos_;
      if (!labels(m)) return;
    } else if (!at_end() && !blank(peek())) {
      return fail(pos_, "invalid character " + excerpt(peek()) + " in metric name");
    }
    skip_blanks();
    if (at_end()) return fail(pos_, "missing value for " + m.name);
    const std::size_t value_at = pos_;
    const std::string_view value_text = token();
    const auto value = parse_go_float(value_text);
    if (!value) return fail(value_at, "bad number " + excerpt(value_text));
    m.value = *value;
    skip_blanks();
    if (!at_end()) {
      const std::size_t ts_at = pos_;
      const std::string_view ts = token();
      std::string_view digits = ts;
      if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) digits.remove_prefix(1);
      long long parsed = 0;
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), parsed);
      if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size())
        return fail(ts_at, "bad timestamp " + excerpt(ts) + " (milliseconds, an integer)");
      skip_blanks();
      if (!at_end()) return fail(pos_, "unexpected text after the timestamp");
    }
    classify(*name, m);
    // A summary's quantile over no observations: client libraries print NaN. A quantile of nothing
    // has no value, so it is left out (the agent would refuse NaN as an invalid value).
    if (m.kind == MetricKind::summary && std::isnan(m.value) &&
        prometheus::has_label(m.labels, "quantile"))
      return;
    metrics.push_back(std::move(m));
  }

  // After '{': label pairs, an optional trailing comma, '}'.
  bool labels(Metric& m) {
    std::set<std::string, std::less<>> seen;
    for (;;) {
      skip_blanks();
      if (peek() == '}') {
        ++pos_;
        return true;
      }
      const std::size_t name_at = pos_;
      if (at_end() || !is_label_name_start(peek())) {
        fail(pos_, at_end() ? "unterminated label set (no '}')" : "expected a label name");
        return false;
      }
      while (!at_end() && is_label_name_char(peek())) ++pos_;
      const std::string label(line_.substr(name_at, pos_ - name_at));
      skip_blanks();
      if (peek() != '=') {
        fail(pos_, "expected '=' after label name " + label);
        return false;
      }
      ++pos_;
      skip_blanks();
      if (peek() != '"') {
        fail(pos_, "expected '\"' to open the value of label " + label);
        return false;
      }
      const std::size_t quote_at = pos_++;
      std::string value;
      const auto read = prometheus::read_label_value(line_.substr(pos_), value);
      if (read.stop == prometheus::LabelValueRead::Stop::bad_escape) {
        fail(pos_ + read.at, "invalid escape sequence in the value of label " + label +
                                 " (only \\\\, \\\" and \\n)");
        return false;
      }
      if (read.stop == prometheus::LabelValueRead::Stop::end) {
        fail(quote_at, "unterminated value of label " + label);
        return false;
      }
      pos_ += read.at + 1;  // past the closing quote
      if (!valid_utf8(value)) {
        fail(quote_at, "the value of label " + label + " is not UTF-8");
        return false;
      }
      if (!seen.insert(label).second) {
        fail(name_at, "label " + label + " given twice");
        return false;
      }
      m.labels.emplace_back(label, std::move(value));
      skip_blanks();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') continue;
      fail(pos_, at_end() ? "unterminated label set (no '}')"
                          : "expected ',' or '}' after the value of label " + label);
      return false;
    }
  }

  std::string_view text_;
  std::string_view line_;
  std::size_t line_no_ = 0;
  std::size_t pos_ = 0;
  std::map<std::string, Family> families_;
  std::vector<std::pair<std::string, std::string>>* help_ = nullptr;
  std::optional<ParseError> error_;
};

// ---------------------------------------------------------------------------------------------
// JSON

std::pair<std::size_t, std::size_t> line_column(std::string_view text, std::size_t offset) {
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

}  // namespace

Parsed parse_prometheus(std::string_view text) {
  return PromParser(text).run();
}

Parsed parse_json(std::string_view text) {
  Parsed out;
  rapidjson::Document doc;
  doc.Parse(text.data(), text.size());  // also refuses anything but white space after the array
  if (doc.HasParseError()) {
    const auto [line, column] = line_column(text, doc.GetErrorOffset());
    out.error = ParseError{
        line, column, "",
        std::string("not valid JSON: ") + rapidjson::GetParseError_En(doc.GetParseError())};
    return out;
  }
  auto fail = [&](std::string where, std::string message) {
    out.metrics.clear();
    out.error = ParseError{0, 0, std::move(where), std::move(message)};
    return out;
  };
  if (!doc.IsArray())
    return fail("",
                "must be a JSON array of metric objects ({\"name\", \"value\", \"unit\", ...})");
  for (rapidjson::SizeType i = 0; i < doc.Size(); ++i) {
    const std::string at = "[" + std::to_string(i) + "]";
    const auto& e = doc[i];
    if (!e.IsObject()) return fail(at, "must be an object");
    Metric m;
    bool has_name = false, has_value = false, has_unit = false;
    for (auto it = e.MemberBegin(); it != e.MemberEnd(); ++it) {
      const std::string key(it->name.GetString(), it->name.GetStringLength());
      const auto& v = it->value;
      if (key == "name") {
        if (!v.IsString()) return fail(at + ".name", "must be a string");
        m.name.assign(v.GetString(), v.GetStringLength());
        has_name = true;
      } else if (key == "value") {
        if (!v.IsNumber()) return fail(at + ".value", "must be a number");
        m.value = v.GetDouble();
        has_value = true;
      } else if (key == "unit") {
        if (!v.IsString()) return fail(at + ".unit", "must be a string");
        m.unit.assign(v.GetString(), v.GetStringLength());
        if (!kiwi::unit_from_string(m.unit))
          return fail(at + ".unit",
                      "\"" + m.unit + "\" is not a unit (" + kiwi::units_text() + " as \"\")");
        has_unit = true;
      } else if (key == "kind") {
        static const std::string kKinds = "\"gauge\", \"counter\", \"histogram\" or \"summary\"";
        if (!v.IsString()) return fail(at + ".kind", "must be " + kKinds);
        const std::string_view kind(v.GetString(), v.GetStringLength());
        const auto known = kiwi::kind_from_string(kind);
        if (!known)
          return fail(at + ".kind", "must be " + kKinds + ", not \"" + std::string(kind) + "\"");
        m.kind = *known;
      } else if (key == "labels") {
        if (!v.IsObject()) return fail(at + ".labels", "must be an object of strings");
        for (auto l = v.MemberBegin(); l != v.MemberEnd(); ++l) {
          const std::string label(l->name.GetString(), l->name.GetStringLength());
          if (!l->value.IsString()) return fail(at + ".labels." + label, "must be a string");
          m.labels.emplace_back(label,
                                std::string(l->value.GetString(), l->value.GetStringLength()));
        }
      } else {
        return fail(at + "." + key,
                    "unknown field (a metric has name, labels, value, unit and kind)");
      }
    }
    if (!has_name) return fail(at, "has no \"name\"");
    if (!has_value) return fail(at, "has no \"value\"");
    if (!has_unit) return fail(at, "has no \"unit\" (\"\" for none)");
    out.metrics.push_back(std::move(m));
  }
  return out;
}

}  // namespace kiwi::exec
