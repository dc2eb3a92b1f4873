// kiwi-agent plugin SDK: writing JSON by hand, header-only and without a JSON library (these
// headers are installed for third-party plugins), and the /api/current body.
//
//   append_json_string(out, s)    a string literal, escaped as RFC 8259 requires
//   append_json_number(out, v)    a metric value as the API prints numbers
//   append_json_shortest(out, v)  a number in its shortest form, laid out as the API prints them
//   render_snapshot_json(snap)    the /api/current body of a snapshot
//   append_config_status_json     the "config" and "reload" members of /api/health and /api/plugins
//
// All of them are pure functions of their arguments: safe from any thread.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "kiwi/model.hpp"
#include "kiwi/utf8.hpp"

namespace kiwi {

// Appends `s` to `out` as a JSON string literal (with quotes): '"' and '\' escaped, control
// characters as \b \t \n \f \r or \u00XX; well-formed UTF-8 as it is, and each byte that is not
// part of a well-formed sequence as U+FFFD, so the literal is valid JSON whatever `s` holds.
inline void append_json_string(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  out.push_back('"');
  std::size_t i = 0;
  while (i < s.size()) {
    // The run of printable ASCII that needs no escape goes in with one append: names, labels and
    // units are nothing else, and a byte at a time cost most of a snapshot's rendering.
    std::size_t plain = i;
    while (plain < s.size()) {
      const auto c = static_cast<unsigned char>(s[plain]);
      if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\') break;
      ++plain;
    }
    out.append(s.data() + i, plain - i);
    i = plain;
    if (i == s.size()) break;
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      // Any byte that is not part of a well-formed sequence becomes U+FFFD: the body stays JSON
      // whatever the text (a request path with %c0%ae in it, a file's garbage, a plugin's label).
      const std::size_t n = utf8_sequence_length(s.substr(i));
      if (n == 0) {
        out += "\xef\xbf\xbd";
        ++i;
      } else {
        out.append(s.substr(i, n));
        i += n;
      }
      continue;
    }
    ++i;
    out.push_back('\\');
    switch (c) {
      case '"':
      case '\\':
        out.push_back(static_cast<char>(c));
        break;
      case '\b':
        out.push_back('b');
        break;
      case '\t':
        out.push_back('t');
        break;
      case '\n':
        out.push_back('n');
        break;
      case '\f':
        out.push_back('f');
        break;
      case '\r':
        out.push_back('r');
        break;
      default:
        out += "u00";
        out.push_back(hex[c >> 4]);
        out.push_back(hex[c & 15]);
    }
  }
  out.push_back('"');
}

// Appends an integer.
inline void append_json_integer(std::string& out, std::int64_t v) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}
inline void append_json_integer(std::string& out, std::uint64_t v) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

// Appends `v` as the API prints numbers: an integral value (a byte count, hertz) as an integer
// (-0 as 0; below 9e15 in magnitude, where every integer is exact); any other value rounded to 6
// decimals, then in its shortest round-trip form, as a decimal (0.25, 12.5, 1e-7 becomes 0.0) up
// to 21 digits before the point and 6 zeros after it, in exponent form beyond (1e21, 1.5e-7):
// these are the bytes the agent has always served. NaN and infinities, which JSON cannot hold,
// as null (the host drops such metrics before they get here).
inline void append_json_shortest(std::string& out, double r);

inline void append_json_number(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  if (std::nearbyint(v) == v && std::fabs(v) < 9e15) {
    append_json_integer(out, static_cast<std::int64_t>(v));
    return;
  }
  double r = std::nearbyint(v * 1e6) / 1e6;
  if (!std::isfinite(r)) r = v;  // |v| near DBL_MAX: no fraction to round away
  append_json_shortest(out, r);
}

// Appends a finite `r` in its shortest round-trip form, laid out as append_json_number describes
// (12.5, 0.0, 1e21, 1.5e-7), without rounding it first. NaN and infinities as null.
inline void append_json_shortest(std::string& out, double r) {
  if (!std::isfinite(r)) {
    out += "null";
    return;
  }
  if (std::signbit(r)) out.push_back('-');
  r = std::fabs(r);
  if (r == 0) {
    out += "0.0";
    return;
  }
  // Shortest digits and the decimal exponent: r = 0.D1D2...Dn x 10^point.
  char sci[32];
  const char* end = std::to_chars(sci, sci + sizeof sci, r, std::chars_format::scientific).ptr;
  const std::string_view text(sci, static_cast<std::size_t>(end - sci));
  const std::size_t e = text.find('e');
  char digit_buf[32];  // on the stack: 17 digits would not fit a short string
  std::size_t n_digits = 0;
  digit_buf[n_digits++] = text[0];
  for (std::size_t k = 2; k < e; ++k) digit_buf[n_digits++] = text[k];  // after "D."
  const std::string_view digits(digit_buf, n_digits);
  std::string_view exponent = text.substr(e + 1);  // "+16", "-07"
  if (exponent.front() == '+') exponent.remove_prefix(1);
  int exp10 = 0;
  std::from_chars(exponent.data(), exponent.data() + exponent.size(), exp10);
  const int point = exp10 + 1;
  const int n = static_cast<int>(digits.size());
  if (n <= point && point <= 21) {  // 1234e7 -> 12340000000.0
    out += digits;
    out.append(static_cast<std::size_t>(point - n), '0');
    out += ".0";
  } else if (0 < point && point <= 21) {  // 1234e-2 -> 12.34
    out += digits.substr(0, static_cast<std::size_t>(point));
    out.push_back('.');
    out += digits.substr(static_cast<std::size_t>(point));
  } else if (-6 < point && point <= 0) {  // 1234e-6 -> 0.001234
    out += "0.";
    out.append(static_cast<std::size_t>(-point), '0');
    out += digits;
  } else {  // 1e30, 1.234e-7
    out.push_back(digits[0]);
    if (n > 1) {
      out.push_back('.');
      out += digits.substr(1);
    }
    out.push_back('e');
    append_json_integer(out, static_cast<std::int64_t>(point - 1));
  }
}

// The /api/current body of `s` (docs/api.md; the shape scripts rely on: extend it, don't reshape
// it). It says "stale":false, once, as a top-level member (string values are escaped, so those
// exact bytes occur nowhere else): the current handler rewrites it when the sample is older than
// s.stale_after_seconds. The agent writes the same bytes to its snapshot file.
inline std::string render_snapshot_json(const Snapshot& s) {
  using namespace std::string_view_literals;  // appends of literals without a strlen each
  std::string out;
  out.reserve(256 + 512 * s.sensors.size());
  auto key = [&](std::string_view k) {
    append_json_string(out, k);
    out.push_back(':');
  };
  out += "{\"version\":1,\"host\":"sv;
  append_json_string(out, s.host);
  out += ",\"sequence\":"sv;
  append_json_integer(out, s.sequence);
  out += ",\"timestamp\":"sv;
  append_json_number(out, s.timestamp);
  out += ",\"interval_seconds\":"sv;
  append_json_number(out, s.interval_seconds);
  out += ",\"stale\":false,\"agent\":{\"version\":"sv;
  append_json_string(out, s.agent_version);
  out += ",\"uptime_seconds\":"sv;
  append_json_number(out, std::floor(std::max(0.0, s.timestamp - s.started_at)));
  out += "},\"sensors\":{"sv;
  bool first_sensor = true;
  for (const SensorReport& r : s.sensors) {
    if (!first_sensor) out.push_back(',');
    first_sensor = false;
    key(r.name);
    out += "{\"plugin\":"sv;
    append_json_string(out, r.plugin);
    out += ",\"status\":"sv;
    append_json_string(out, to_string(r.state));
    if (!r.message.empty()) {
      out += ",\"message\":"sv;
      append_json_string(out, r.message);
    }
    out += ",\"timestamp\":"sv;
    append_json_number(out, r.timestamp);
    out += ",\"duration_seconds\":"sv;
    append_json_number(out, r.duration_seconds);
    if (r.errors_total) {
      out += ",\"errors_total\":"sv;
      append_json_integer(out, r.errors_total);
    }
    if (r.invalid_metrics_total) {
      out += ",\"invalid_metrics_total\":"sv;
      append_json_integer(out, r.invalid_metrics_total);
    }
    if (r.series_refused_total) {
      out += ",\"series_refused_total\":"sv;
      append_json_integer(out, r.series_refused_total);
    }
    out += ",\"metrics\":["sv;
    bool first_metric = true;
    for (const MetricValue& m : r.metrics) {
      if (!first_metric) out.push_back(',');
      first_metric = false;
      out += "{\"name\":"sv;
      append_json_string(out, m.name);
      if (!m.labels.empty()) {
        out += ",\"labels\":{"sv;
        bool first_label = true;
        for (const auto& [k, v] : m.labels) {
          if (!first_label) out.push_back(',');
          first_label = false;
          key(k);
          append_json_string(out, v);
        }
        out.push_back('}');
      }
      out += ",\"value\":"sv;
      append_json_number(out, m.value);
      out += ",\"unit\":"sv;
      append_json_string(out, m.unit);
      if (m.kind != MetricKind::gauge) {
        out += ",\"kind\":"sv;
        append_json_string(out, to_string(m.kind));
      }
      out.push_back('}');
    }
    out += "]}"sv;
  }
  out += "}}"sv;
  return out;
}

// Appends `,"config":{...},"reload":{...}` (docs/api.md), shared by /api/health and /api/plugins.
inline void append_config_status_json(std::string& out, const ConfigStatus& c) {
  char buf[160];
  std::snprintf(buf, sizeof buf, ",\"config\":{\"generation\":%llu,\"loaded_at\":%.3f,\"source\":",
                static_cast<unsigned long long>(c.generation), c.loaded_at);
  out += buf;
  append_json_string(out, c.source);
  out += "},\"reload\":{\"status\":";
  append_json_string(out, c.reload_status);
  if (c.reload_at > 0) {
    std::snprintf(buf, sizeof buf, ",\"at\":%.3f", c.reload_at);
    out += buf;
  } else {
    out += ",\"at\":null";
  }
  out += ",\"message\":";
  if (c.reload_status == "failed")
    append_json_string(out, c.reload_message);
  else
    out += "null";
  out += ",\"ok_total\":" + std::to_string(c.reloads_ok) +
         ",\"failed_total\":" + std::to_string(c.reloads_failed) + "}";
}

}  // namespace kiwi
