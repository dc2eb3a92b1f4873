#include "output/output.hpp"
#include "base/thread_name.hpp"

#include <algorithm>
#include <kiwi/glob.hpp>
#include <kiwi/io.hpp>
#include <unordered_map>

namespace kiwi::agent {

namespace {

constexpr std::int64_t kDropLogEveryMs = 60'000;

}  // namespace

Millis backoff_delay(int failures) {
  if (failures <= 1) return kBackoffFirst;
  const int shift = std::min(failures - 1, 20);
  return std::min(kBackoffCap, Millis(kBackoffFirst.count() << shift));
}

OutputBatch make_batch(const std::vector<Store::RawTick>& ticks, const SeriesCatalog& catalog,
                       const std::function<bool(const SeriesInfo&)>& wanted) {
  OutputBatch batch;
  if (ticks.empty()) return batch;
  batch.oldest_ms = ticks.front().ts_ms;
  batch.newest_ms = ticks.back().ts_ms;
  std::unordered_map<std::uint32_t, std::size_t> index;       // series id -> batch.series position
  std::vector<signed char> accepted(catalog.size() + 1, -1);  // by id: -1 unknown, 0 no, 1 yes
  for (const auto& tick : ticks)
    for (const auto& [id, value] : tick.values) {
      if (id == 0 || id > catalog.size()) continue;  // a row newer than this catalog copy
      if (accepted[id] < 0) accepted[id] = wanted(catalog[id - 1]) ? 1 : 0;
      if (!accepted[id]) continue;
      auto [it, added] = index.try_emplace(id, batch.series.size());
      if (added) {
        const SeriesInfo& info = catalog[id - 1];
        OutputSeries& s = batch.series.emplace_back();
        s.name = info.name;
        s.labels = info.labels;
        std::sort(s.labels.begin(), s.labels.end());
        s.unit = unit_from_string(info.unit).value_or(Unit::none);
        s.kind = info.kind;
      }
      batch.series[it->second].points.push_back({tick.ts_ms, value});
      ++batch.sample_count;
    }
  return batch;
}

OutputRunner::OutputRunner(OutputSpec spec, Store& store, Logger& log, Clock& clock)
    : spec_(std::move(spec)), store_(store), log_(log), clock_(clock) {
  if (auto c = store_.cursor(spec_.name)) {
    acked_ = *c;
  } else {
    // A new output begins with what is stored now, not with the whole history.
    acked_ = std::max<std::int64_t>(0, store_.ticks_after(INT64_MIN).second);
    store_.set_cursor(spec_.name, acked_);
  }
  status_.name = spec_.name;
  status_.plugin = spec_.plugin;
  status_.state = "starting";
  status_.interval_seconds = static_cast<double>(spec_.interval.count()) / 1000;
  status_.acked_at = static_cast<double>(acked_) / 1000;
}

OutputRunner::~OutputRunner() {
  stop();
}

void OutputRunner::start() {
  thread_ = std::thread([this] {
    name_this_thread("kiwi-o:" + spec_.name);
    run();
  });
}

void OutputRunner::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool OutputRunner::wanted(const SeriesInfo& s) const {
  if (spec_.series.empty()) return true;
  for (const auto& p : spec_.series)
    if (glob_match(p, s.name) || glob_match(p, s.key)) return true;
  return false;
}

std::int64_t OutputRunner::acked_ms() const {
  return acked_;
}

OutputStatus OutputRunner::status() const {
  std::lock_guard lock(status_mutex_);
  return status_;
}

void OutputRunner::update_backlog() {
  const auto [ticks, newest] = store_.ticks_after(acked_);
  std::lock_guard lock(status_mutex_);
  status_.acked_at = static_cast<double>(acked_) / 1000;
  status_.seconds_behind =
      ticks && newest > acked_ ? static_cast<double>(newest - acked_) / 1000 : 0;
  status_.samples_pending = static_cast<std::uint64_t>(static_cast<double>(ticks) * per_tick_);
}

OutputRunner::Step OutputRunner::step() {
  bool more = false;
  std::vector<Store::RawTick> ticks;
  try {
    ticks = store_.read_raw(acked_, spec_.max_samples, &more);
  } catch (const StoreError& e) {
    log_.warn(std::string("cannot read history: ") + e.what());
    return Step::retry;
  }
  if (ticks.empty()) {
    update_backlog();
    return Step::idle;
  }
  const Store::Catalog catalog = store_.series();
  OutputBatch batch = make_batch(ticks, *catalog, [&](const SeriesInfo& s) { return wanted(s); });
  per_tick_ = static_cast<double>(batch.sample_count) / static_cast<double>(ticks.size());
  const std::int64_t newest = ticks.back().ts_ms;
  WriteResult r = WriteResult::ok();
  if (batch.sample_count > 0) {
    try {
      r = spec_.instance.object->write(batch);
    } catch (const std::exception& e) {
      r = WriteResult::retry(e.what());
    }
  }
  const double now = static_cast<double>(clock_.wall_ms()) / 1000;
  Step step = more ? Step::more : Step::sent;
  switch (r.status) {
    case WriteStatus::ok: {
      acked_ = newest;
      store_.set_cursor(spec_.name, acked_);
      if (failures_in_row_ > 0)
        log_.info("receiver answers again after " + std::to_string(failures_in_row_) +
                  (failures_in_row_ == 1 ? " failure" : " failures") + "; sending the backlog");
      failures_in_row_ = 0;
      std::lock_guard lock(status_mutex_);
      status_.samples_sent_total += batch.sample_count;
      if (batch.sample_count) ++status_.batches_sent_total;
      break;
    }
    case WriteStatus::drop: {
      acked_ = newest;
      store_.set_cursor(spec_.name, acked_);
      failures_in_row_ = 0;
      const std::int64_t now_ms = clock_.wall_ms();
      if (last_drop_log_ms_ == INT64_MIN || now_ms - last_drop_log_ms_ >= kDropLogEveryMs) {
        log_.warn("receiver refused a batch of " + std::to_string(batch.sample_count) +
                  " samples, dropped" +
                  (drops_unlogged_ ? " (and " + std::to_string(drops_unlogged_) +
                                         " more batches since the last such line)"
                                   : "") +
                  ": " + r.reason);
        last_drop_log_ms_ = now_ms;
        drops_unlogged_ = 0;
      } else {
        ++drops_unlogged_;
      }
      std::lock_guard lock(status_mutex_);
      ++status_.batches_dropped_total;
      status_.samples_dropped_total += batch.sample_count;
      status_.last_error = kiwi::to_valid_utf8(r.reason);  // a receiver's text: any bytes
      status_.last_error_at = now;
      step = more ? Step::more : Step::dropped;
      break;
    }
    case WriteStatus::retry: {
      if (failures_in_row_ == 0) log_.warn("cannot send, will retry: " + r.reason);
      ++failures_in_row_;
      std::lock_guard lock(status_mutex_);
      ++status_.failures_total;
      status_.last_error = kiwi::to_valid_utf8(r.reason);  // a receiver's text: any bytes
      status_.last_error_at = now;
      step = Step::retry;
      break;
    }
  }
  update_backlog();
  return step;
}

void OutputRunner::run() {
  for (;;) {
    const Step s = step();
    Millis wait = spec_.interval;
    std::string state = "live";
    if (s == Step::more) {
      wait = Millis(0);
      state = "catching_up";
    } else if (s == Step::retry) {
      wait = backoff_delay(failures_in_row_);
      state = "retrying";
    }
    {
      std::lock_guard lock(status_mutex_);
      status_.state = state;
    }
    // A backoff longer than the interval is waited out in slices of it, the backlog updated after
    // each, so /api/health and /metrics show it growing during an outage.
    const auto until = clock_.steady_now() + wait;
    for (;;) {
      std::unique_lock lock(mutex_);
      if (stopping_) return;
      const auto now = clock_.steady_now();
      if (now >= until) break;
      if (clock_.wait_until(wake_, lock, std::min(until, now + spec_.interval),
                            [&] { return stopping_; }))
        return;
      lock.unlock();
      if (clock_.steady_now() < until) update_backlog();
    }
  }
}

}  // namespace kiwi::agent
