#include "pressure_parse.hpp"

#include <kiwi/io.hpp>
#include <kiwi/text.hpp>
#include <optional>
#include <stdexcept>
#include <string>

namespace kiwi::pressure {

namespace {

// "12.50" (the kernel's "%lu.%02lu"; also "12.5" and "12") as 1250.
std::optional<std::uint64_t> percent_hundredths(std::string_view s) {
  const std::size_t dot = s.find('.');
  const std::string_view whole = s.substr(0, dot);
  std::string fraction(dot == std::string_view::npos ? "" : s.substr(dot + 1));
  if (whole.empty() || fraction.size() > 2) return std::nullopt;
  fraction.resize(2, '0');
  const auto w = kiwi::to_number<std::uint64_t>(whole);
  const auto f = kiwi::to_number<std::uint64_t>(fraction);
  if (!w || !f || *w > 100) return std::nullopt;
  return *w * 100 + *f;
}

std::invalid_argument bad_line(std::string_view line, std::string_view why) {
  return std::invalid_argument("line " + kiwi::quote_excerpt(line) + ": " + std::string(why));
}

}  // namespace

Psi parse_psi(std::string_view text) {
  Psi out;
  for (const std::string_view line : kiwi::Lines(text)) {
    std::string_view rest = line;
    const std::string_view kind = kiwi::next_field(rest);
    if (kind != "some" && kind != "full") continue;
    PsiLine p;
    bool seen[4] = {};
    for (std::string_view f = kiwi::next_field(rest); !f.empty(); f = kiwi::next_field(rest)) {
      const std::size_t eq = f.find('=');
      if (eq == std::string_view::npos) throw bad_line(line, "a field is not key=value");
      const std::string_view key = f.substr(0, eq), value = f.substr(eq + 1);
      if (key == "total") {
        const auto v = kiwi::to_number<std::uint64_t>(value);
        if (!v) throw bad_line(line, "total is not a counter");
        p.total_us = *v;
        seen[3] = true;
        continue;
      }
      double* avg = key == "avg10"    ? &p.avg10
                    : key == "avg60"  ? &p.avg60
                    : key == "avg300" ? &p.avg300
                                      : nullptr;
      if (!avg) continue;  // a field a later kernel may add
      const auto hundredths = percent_hundredths(value);
      if (!hundredths || *hundredths > 10000)
        throw bad_line(line, std::string(key) + " is not a percentage");
      *avg = static_cast<double>(*hundredths) / 10000;
      seen[key == "avg10" ? 0 : key == "avg60" ? 1 : 2] = true;
    }
    if (!(seen[0] && seen[1] && seen[2] && seen[3]))
      throw bad_line(line, "needs avg10, avg60, avg300 and total");
    (kind == "some" ? out.some : out.full) = p;
  }
  return out;
}

VmEvents parse_vmstat(std::string_view text) {
  VmEvents out;
  for (const std::string_view line : kiwi::Lines(text)) {
    std::string_view rest = line;
    const std::string_view name = kiwi::next_field(rest);
    std::optional<std::uint64_t>* field = name == "oom_kill"     ? &out.oom_kill
                                          : name == "pgmajfault" ? &out.pgmajfault
                                          : name == "pswpin"     ? &out.pswpin
                                          : name == "pswpout"    ? &out.pswpout
                                                                 : nullptr;
    if (!field) continue;
    const auto v = kiwi::to_number<std::uint64_t>(kiwi::next_field(rest));
    if (!v) throw bad_line(line, "the value is not a counter");
    *field = *v;
  }
  return out;
}

std::optional<std::uint64_t> parse_btime(std::string_view stat_text) {
  std::optional<std::uint64_t> out;
  for (const std::string_view line : kiwi::Lines(stat_text)) {
    std::string_view rest = line;
    if (kiwi::next_field(rest) != "btime") continue;
    const auto v = kiwi::to_number<std::uint64_t>(kiwi::next_field(rest));
    if (!v) throw bad_line(line, "btime is not a number of seconds");
    out = *v;
  }
  return out;
}

}  // namespace kiwi::pressure
