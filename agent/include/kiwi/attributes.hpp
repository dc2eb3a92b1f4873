// kiwi-agent plugin SDK: reading a sample's small attribute files (sysfs: one value per file) the
// way every sensor does. A missing file is left out without a word (this board has no such
// attribute); one that cannot be read or does not parse is left out and named. The names go into
// the sample's message each sample, and into the log only when they change, so a broken file is
// one warning, not one a second.
#pragma once

#include <exception>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiwi/io.hpp"
#include "kiwi/plugin.hpp"

namespace kiwi {

class AttributeReads {
 public:
  // The value of the file at `path`: `parse(text)` returns an optional, nullopt meaning "not a
  // value". nullopt when the file does not exist (no problem), cannot be read (its error is
  // noted) or does not parse ("<path>: not a value: '<excerpt>'" is noted).
  template <class Parse>
  auto read(const std::string& path, Parse&& parse) -> decltype(parse(std::string_view{})) {
    try {
      const auto text = kiwi::read_file(path);
      if (!text) return std::nullopt;
      auto value = parse(std::string_view(*text));
      if (!value) note(path + ": not a value: " + kiwi::quote_excerpt(*text, 40));
      return value;
    } catch (const std::exception& e) {  // EACCES, EIO, not a regular file, over the cap
      note(e.what());
      return std::nullopt;
    }
  }

  // A problem found some other way (a directory that cannot be listed).
  void note(std::string problem) { problems_.push_back(std::move(problem)); }
  bool clean() const { return problems_.empty(); }

  // This sample's problems joined with "; " ("" when none), logged at warn when they differ from
  // the last ones logged; the next sample starts with none.
  std::string finish(Logger& log) {
    std::string joined = kiwi::join(problems_);
    problems_.clear();
    if (!joined.empty() && joined != last_logged_) log.warn(joined);
    last_logged_ = joined;
    return joined;
  }

 private:
  std::vector<std::string> problems_;
  std::string last_logged_;
};

}  // namespace kiwi
