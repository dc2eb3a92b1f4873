#include "history_render.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>

#include <kiwi/glob.hpp>
#include <kiwi/json.hpp>

namespace kiwi_history {

namespace {
constexpr std::string_view kAccepted[] = {"limit", "since",  "until", "step",
                                          "agg",   "series", "band",  "format"};

// Rounded to `decimals` places, then printed in its shortest form (whole numbers without ".0");
// NaN (no value) as null. |v| near DBL_MAX overflows when scaled: it has no fraction to round.
void number(std::string& out, double v, int decimals) {
  if (std::isnan(v)) return void(out += "null");
  const double scale = std::pow(10.0, decimals);
  double r = std::nearbyint(v * scale) / scale;
  if (!std::isfinite(r)) r = v;
  if (std::nearbyint(r) == r && std::fabs(r) < 9e15)
    kiwi::append_json_integer(out, static_cast<std::int64_t>(r));
  else
    kiwi::append_json_shortest(out, r);
}

// `count` numbers (default: all of `values`); null past the end of `values` (a band that an
// agent before ABI 1.7 does not answer).
void numbers(std::string& out, const std::vector<double>& values, int decimals,
             std::optional<std::size_t> count = {}) {
  out.push_back('[');
  for (std::size_t i = 0; i < count.value_or(values.size()); ++i) {
    if (i) out.push_back(',');
    number(out, i < values.size() ? values[i] : std::nan(""), decimals);
  }
  out.push_back(']');
}

std::optional<double> parse_number(std::string_view s) {
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<int> digits(std::string_view s, std::size_t at, std::size_t n) {
  if (at + n > s.size()) return std::nullopt;
  int v = 0;
  for (std::size_t i = at; i < at + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

std::string quoted(std::string_view s) {
  return "'" + std::string(s) + "'";
}

constexpr std::pair<std::string_view, kiwi::Aggregate> kAggregates[] = {
    {"mean", kiwi::Aggregate::mean},
    {"max", kiwi::Aggregate::max},
    {"min", kiwi::Aggregate::min},
    {"last", kiwi::Aggregate::last}};

std::string_view aggregate_name(kiwi::Aggregate a) {
  for (auto& [name, value] : kAggregates)
    if (value == a) return name;
  return "mean";
}
}  // namespace

namespace {
// Digits with an optional fraction: "1764475800", "0.5". No sign, exponent, "inf" or "nan".
bool plain_decimal(std::string_view s) {
  const auto dot = s.find('.');
  auto all_digits = [](std::string_view d) {
    return !d.empty() &&
           std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  return all_digits(s.substr(0, dot)) &&
         (dot == std::string_view::npos || all_digits(s.substr(dot + 1)));
}
}  // namespace

std::optional<double> parse_time(std::string_view s) {
  if (plain_decimal(s)) return parse_number(s);
  // RFC 3339: YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)
  auto Y = digits(s, 0, 4), M = digits(s, 5, 2), D = digits(s, 8, 2), h = digits(s, 11, 2),
       m = digits(s, 14, 2), sec = digits(s, 17, 2);
  if (!Y || !M || !D || !h || !m || !sec || s[4] != '-' || s[7] != '-' ||
      (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || s[13] != ':' || s[16] != ':')
    return std::nullopt;
  if (*M < 1 || *M > 12 || *D < 1 || *D > 31 || *h > 23 || *m > 59 || *sec > 60)
    return std::nullopt;
  std::size_t i = 19;
  double frac = 0;
  if (i < s.size() && s[i] == '.') {
    std::size_t j = i + 1;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
    if (j == i + 1) return std::nullopt;
    frac = *parse_number("0" + std::string(s.substr(i, j - i)));
    i = j;
  }
  int offset = 0;
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
    ++i;
  } else if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    auto oh = digits(s, i + 1, 2), om = digits(s, i + 4, 2);
    if (!oh || !om || s[i + 3] != ':' || *oh > 23 || *om > 59) return std::nullopt;
    offset = (s[i] == '+' ? 1 : -1) * (*oh * 3600 + *om * 60);
    i += 6;
  } else {
    return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  std::tm tm{};
  tm.tm_year = *Y - 1900;
  tm.tm_mon = *M - 1;
  tm.tm_mday = *D;
  tm.tm_hour = *h;
  tm.tm_min = *m;
  tm.tm_sec = *sec;
  return static_cast<double>(timegm(&tm)) + frac - offset;
}

std::variant<double, std::string> parse_time_param(std::string_view s, double now) {
  const std::string forms =
      "; use unix seconds (1764475800), RFC 3339 (2026-11-30T05:00:00Z) or negative seconds "
      "before now (-300)";
  const std::string range = "2000-01-01T00:00:00Z (946684800) and a day from now";
  if (!s.empty() && s[0] == '-') {
    if (!plain_decimal(s.substr(1))) return quoted(s) + " is not a time" + forms;
    const double t = now - *parse_number(s.substr(1));
    if (t < kEarliestTime) return quoted(s) + " reaches back before 2000-01-01T00:00:00Z";
    return t;
  }
  const auto t = parse_time(s);
  if (!t) {
    // An unencoded '+' (the sign of an RFC 3339 offset) arrives as a space: the query string is
    // form-encoded. A space is also allowed between date and time, so only others are flagged.
    std::string_view rest = s.size() > 11 && s[10] == ' ' ? s.substr(11) : s;
    if (rest.find(' ') != std::string_view::npos)
      return quoted(s) +
             " is not a time: it has a space, which is what a '+' sent unencoded in a "
             "URL becomes; write '+' as %2B (2026-11-30T06:00:00%2B01:00)";
    return quoted(s) + " is not a time" + forms;
  }
  if (*t < kEarliestTime || *t > now + kLatestAfterNow)
    return quoted(s) + " is out of range: a time must lie between " + range +
           "; give unix seconds (not milliseconds), or negative seconds for a time before now "
           "(-300)";
  return *t;
}

int decimals_for_unit(std::string_view unit) {
  static constexpr std::pair<std::string_view, int> kDecimals[] = {
      {"bytes", 0}, {"hertz", 0},   {"count", 0},   {"bytes_per_second", 0},
      {"rpm", 0},   {"ratio", 4},   {"celsius", 2}, {"seconds", 4},
      {"volts", 3}, {"amperes", 3}, {"watts", 3},   {"", 2}};
  for (auto& [u, d] : kDecimals)
    if (u == unit) return d;
  return 4;
}

namespace {
// Where the item at the start of a series= list ends: the first ',' outside a key's braces and
// outside its quoted label values (thermal_celsius{sensor="a,b"} and
// power_throttle_flag{flag="under_voltage",when="now"} are one item each); npos at the end.
std::size_t list_comma(std::string_view list) {
  bool quoted = false;
  int depth = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const char c = list[i];
    if (quoted) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        quoted = false;
    } else if (c == '"' && depth > 0) {
      quoted = true;
    } else if (c == '{') {
      ++depth;
    } else if (c == '}' && depth > 0) {
      --depth;
    } else if (c == ',' && depth == 0) {
      return i;
    }
  }
  return std::string_view::npos;
}
}  // namespace

std::variant<ParsedQuery, ParamError> parse_query(const kiwi::Request& req, double now,
                                                  const std::vector<std::string>& known_series,
                                                  const std::vector<std::string>& default_series) {
  for (auto& p : req.query) {
    if (std::find(std::begin(kAccepted), std::end(kAccepted), p.name) == std::end(kAccepted))
      return ParamError{std::string(p.name),
                        "unknown parameter; accepted: limit, since, until, step, agg, series, "
                        "band, format"};
    if (req.count(p.name) > 1) return ParamError{std::string(p.name), "given more than once"};
    if (p.value.empty())
      return ParamError{std::string(p.name), "is empty; give a value or leave the parameter out"};
  }
  ParsedQuery out;
  kiwi::HistoryQuery& q = out.query;

  for (auto [name, target] : {std::pair{"since", &q.since}, std::pair{"until", &q.until}}) {
    auto v = req.param(name);
    if (!v) continue;
    auto t = parse_time_param(*v, now);
    if (auto* message = std::get_if<std::string>(&t)) return ParamError{name, std::move(*message)};
    *target = std::get<double>(t);
    out.relative = out.relative || v->front() == '-';
  }
  if (q.since && q.until && *q.since > *q.until) return ParamError{"since", "since is after until"};

  if (auto v = req.param("step")) {
    auto step = parse_number(*v);
    if (!step) return ParamError{"step", quoted(*v) + " is not a number of seconds"};
    if (*step <= 0) return ParamError{"step", quoted(*v) + " must be more than 0 seconds"};
    if (*step > 366 * 86400.0) return ParamError{"step", quoted(*v) + " is more than a year"};
    q.step = *step;
  }
  if (auto v = req.param("agg")) {
    if (q.step <= 0) return ParamError{"agg", "only applies with step"};
    bool found = false;
    for (auto& [name, value] : kAggregates)
      if (name == *v) {
        q.aggregate = value;
        found = true;
      }
    if (!found)
      return ParamError{"agg", quoted(*v) + " is not an aggregate; use mean, max, min or last"};
  }
  if (auto v = req.param("band")) {
    if (q.step <= 0) return ParamError{"band", "only applies with step"};
    if (*v != "true" && *v != "1" && *v != "false" && *v != "0")
      return ParamError{"band", quoted(*v) + " is not a boolean; use true, 1, false or 0"};
    q.band = *v == "true" || *v == "1";
  }
  if (auto v = req.param("format")) {
    if (*v == "csv")
      out.format = Format::csv;
    else if (*v != "json")
      return ParamError{"format", quoted(*v) + " is not a format; use json or csv"};
  }

  const bool windowed = q.since || q.step > 0;
  const std::size_t max_points = q.step > 0 ? kMaxStepPoints : kMaxLimit;
  q.limit = windowed ? max_points : kDefaultLimit;
  if (auto v = req.param("limit")) {
    const std::string range = "an integer from 1 to " + std::to_string(max_points);
    std::size_t n = 0;
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
    if (ec == std::errc::result_out_of_range)
      return ParamError{"limit", quoted(*v) + " is out of range; expected " + range};
    if (ec != std::errc() || end != v->data() + v->size())
      return ParamError{"limit", quoted(*v) + " is not an integer; expected " + range};
    if (n < 1 || n > max_points)
      return ParamError{"limit", std::to_string(n) + " is out of range; expected " + range};
    q.limit = n;
  }
  if (q.step > 0) {
    // Until defaults to now. Without since, the store returns the latest `limit` buckets that hold
    // data, however far back they go (a window of `limit` steps would count empty buckets too).
    if (!q.until) q.until = now;
    double points = q.since ? std::ceil((*q.until - *q.since) / q.step) : 0;
    // Counted in words past 10^15: a tiny step over a long window overflows any integer.
    if (points > static_cast<double>(kMaxStepPoints))
      return ParamError{"step", "the window holds " +
                                    (points < 1e15 ? std::to_string(static_cast<long long>(points))
                                                   : std::string("more than 10^15")) +
                                    " steps of " + std::string(*req.param("step")) +
                                    " s; at most " + std::to_string(kMaxStepPoints) +
                                    " points per response, use a larger step"};
  }

  if (auto v = req.param("series")) {
    std::string_view rest = *v;
    while (true) {
      auto comma = list_comma(rest);
      std::string_view item = rest.substr(0, comma);
      if (item.empty()) return ParamError{"series", "empty name in the list"};
      bool matches = false;
      for (auto& known : known_series) {
        std::string_view name = std::string_view(known).substr(0, known.find('{'));
        matches = matches || kiwi::glob_match(item, name) || kiwi::glob_match(item, known);
      }
      // A name that matches nothing is a typo; a glob that matches nothing is a plugin that is not
      // running here (network_* on a board without it): no series, not an error.
      if (!matches && item.find('*') == std::string_view::npos)
        return ParamError{"series",
                          quoted(item) + " matches no series; see /api/current for names"};
      q.patterns.emplace_back(item);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  } else if (std::find(default_series.begin(), default_series.end(), "*") == default_series.end()) {
    q.patterns = default_series;
  }

  // Every value exactly (shortest round-trip form) and whole: two different queries never share
  // a key. Patterns come last, each after its length (a key's labels hold commas).
  auto exact = [](std::optional<double> v) {
    if (!v) return std::string("-");
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, *v);
    return std::string(buf, ec == std::errc() ? end : buf);
  };
  out.canonical = "l=" + std::to_string(q.limit) + "&s=" + exact(q.since) + "&u=" + exact(q.until) +
                  "&st=" + exact(q.step) + "&a=" + std::to_string(static_cast<int>(q.aggregate)) +
                  "&b=" + (q.band ? "1" : "0") +
                  "&f=" + (out.format == Format::csv ? "csv" : "json") + "&p=";
  for (auto& p : q.patterns) out.canonical += std::to_string(p.size()) + ":" + p;
  return out;
}

// Written with the SDK's JSON functions (kiwi/json.hpp), as every other body the agent serves:
// one escaping and one number format for all of them. (RapidJSON's Writer did pointer
// arithmetic on a null stack pointer at its first write, undefined behaviour that clang's
// -fsanitize=pointer-overflow reports on every render, and wrote nothing for an infinity.)
std::string render(const kiwi::HistoryResult& r, const kiwi::HistoryQuery& q) {
  std::string out;
  out.reserve(128 + 12 * r.timestamps.size() * (1 + r.series.size()) + 128 * r.series.size());
  out += "{\"version\":1,\"count\":";
  kiwi::append_json_integer(out, static_cast<std::uint64_t>(r.timestamps.size()));
  if (q.step > 0) {
    out += ",\"step\":";
    number(out, q.step, 3);
    out += ",\"agg\":";
    kiwi::append_json_string(out, aggregate_name(q.aggregate));
  }
  out += ",\"timestamps\":";
  numbers(out, r.timestamps, 3);
  out += ",\"series\":{";
  bool first = true;
  for (auto& s : r.series) {
    if (!first) out.push_back(',');
    first = false;
    kiwi::append_json_string(out, s.key);
    out += ":{\"name\":";
    kiwi::append_json_string(out, s.name);
    if (!s.labels.empty()) {
      out += ",\"labels\":{";
      bool first_label = true;
      for (auto& [k, v] : s.labels) {
        if (!first_label) out.push_back(',');
        first_label = false;
        kiwi::append_json_string(out, k);
        out.push_back(':');
        kiwi::append_json_string(out, v);
      }
      out.push_back('}');
    }
    out += ",\"unit\":";
    kiwi::append_json_string(out, s.unit);
    const int decimals = decimals_for_unit(s.unit);
    out += ",\"values\":";
    numbers(out, s.values, decimals);
    if (q.band) {
      out += ",\"min\":";
      numbers(out, s.min, decimals, s.values.size());
      out += ",\"max\":";
      numbers(out, s.max, decimals, s.values.size());
    }
    out += "}";
  }
  out += "}}";
  return out;
}

namespace {
// A CSV field: as it is, or in double quotes with its quotes doubled when it holds a comma, a
// quote or a line break (RFC 4180; a series key has quotes, a label value may have commas).
void csv_field(std::string& out, std::string_view field) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) return void(out += field);
  out.push_back('"');
  for (char c : field) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
}

// A value as render() writes it; nothing where JSON has null.
void csv_number(std::string& out, double v, int decimals) {
  if (std::isfinite(v)) number(out, v, decimals);
}
}  // namespace

std::string render_csv(const kiwi::HistoryResult& r, const kiwi::HistoryQuery& q) {
  struct Column {
    const std::vector<double>* values;
    int decimals;
  };
  std::vector<Column> columns;  // a band an agent before ABI 1.7 does not answer is empty
  std::string out = "timestamp";
  for (auto& s : r.series) {
    const int decimals = decimals_for_unit(s.unit);
    out.push_back(',');
    csv_field(out, s.key);
    columns.push_back({&s.values, decimals});
    if (!q.band) continue;
    for (auto [side, suffix] : {std::pair{&s.min, ":min"}, std::pair{&s.max, ":max"}}) {
      out.push_back(',');
      csv_field(out, s.key + suffix);
      columns.push_back({side, decimals});
    }
  }
  out += "\r\n";
  out.reserve(out.size() + r.timestamps.size() * (14 + 10 * columns.size()));
  for (std::size_t row = 0; row < r.timestamps.size(); ++row) {
    number(out, r.timestamps[row], 3);
    for (auto& c : columns) {
      out.push_back(',');
      if (row < c.values->size()) csv_number(out, (*c.values)[row], c.decimals);
    }
    out += "\r\n";
  }
  return out;
}

std::string_view content_type(Format format) {
  return format == Format::csv ? "text/csv; charset=utf-8" : "application/json";
}

}  // namespace kiwi_history
