// Minute summaries not in the file yet (schema.hpp): the closed minutes of the hour in progress,
// and of an hour closed since the last commit, which folds it into hour rows. A minute's summary
// is written once, in its hour's rows: it costs no flash write of its own, and one lost with the
// process (kill -9) is made again from the ticks, which are in the file (Writer::open_hour()).
// The writer publishes them here whole when they change; a query takes them before it reads the
// file, so an hour is in one or the other (or both, the same) whenever it looks.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kiwi::agent {

// A minute's summary: a row per group of Store::kGroupSeries series (rollup.hpp; empty: no series
// of that group), each sample_codec::pack_if_smaller()ed.
struct MinuteRows {
  std::int64_t minute;
  std::vector<std::string> groups;
};

class MinuteBoard {
 public:
  using View = std::shared_ptr<const std::vector<MinuteRows>>;  // minute order
  View view() const {
    std::lock_guard lock(mutex_);
    return view_;
  }
  void publish(std::vector<MinuteRows> minutes) {
    auto v = std::make_shared<const std::vector<MinuteRows>>(std::move(minutes));
    std::lock_guard lock(mutex_);
    view_ = std::move(v);
  }

 private:
  mutable std::mutex mutex_;
  View view_ = std::make_shared<const std::vector<MinuteRows>>();
};

}  // namespace kiwi::agent
