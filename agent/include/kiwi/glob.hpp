// kiwi-agent plugin SDK: the one glob matcher (series selection, include/exclude options) and the
// one include/exclude filter every plugin that selects names by option uses.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiwi {

// `*` matches any run of characters (also none); every other character matches itself.
// Linear in practice: one backtrack point, so "a*b*c" patterns never go exponential.
inline bool glob_match(std::string_view p, std::string_view t) {
  std::size_t pi = 0, ti = 0, star = std::string_view::npos, mark = 0;
  while (ti < t.size()) {
    if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = ti;
    } else if (pi < p.size() && p[pi] == t[ti]) {
      ++pi;
      ++ti;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      ti = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

// An include list and an exclude list of patterns: a name passes if it matches an include pattern
// and no exclude pattern (exclusion wins; an empty include list lets nothing through). Patterns are
// globs (glob_match) unless another matcher is given, such as a path-prefix test for mount points.
// Plugins build it from two string_list options, `include` and `exclude` by convention.
class NameFilter {
 public:
  using Matcher = bool (*)(std::string_view pattern, std::string_view name);

  NameFilter(std::vector<std::string> include, std::vector<std::string> exclude,
             Matcher match = &glob_match)
      : include_(std::move(include)), exclude_(std::move(exclude)), match_(match) {}

  bool passes(std::string_view name) const { return any(include_, name) && !any(exclude_, name); }

 private:
  bool any(const std::vector<std::string>& patterns, std::string_view name) const {
    return std::any_of(patterns.begin(), patterns.end(),
                       [&](const std::string& p) { return match_(p, name); });
  }
  std::vector<std::string> include_;
  std::vector<std::string> exclude_;
  Matcher match_;
};

}  // namespace kiwi
