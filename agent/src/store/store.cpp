// The store's interface (store.hpp) over its layers: opening the file, recovering from a damaged
// one, and the calls of the writer and the readers.
#include "store/store.hpp"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <mutex>

#include "store/cursors.hpp"
#include "store/query.hpp"
#include "store/queue.hpp"
#include "store/reader.hpp"
#include "store/schema.hpp"
#include "store/series_table.hpp"
#include "store/writer.hpp"

namespace kiwi::agent {

class Store::Impl {
 public:
  explicit Impl(std::string p) : path(std::move(p)), log(path + "-ticks"), pool(path, log) {}
  ~Impl() {
    pool.clear();
    try {
      writer.commit_series();
    } catch (const std::exception&) {
      // The tick log's records carry them: the next open takes them from there.
    }
    writer.close();
  }

  void open_file();                      // opens path as the writer's: set up, load (StoreError)
  void recover(const std::string& why);  // moves path aside, opens a new file (StoreError)
  void commit(const Cutoffs& cutoffs, int prune_rows);  // flush() once (StoreError)
  // The verdict of the quick_check started at open ("ok" or what it found), once it is in
  // (waiting for it with `wait`); nullopt while it runs or when none was started. Writer thread.
  std::optional<std::string> check_verdict(bool wait);
  std::uint64_t recoveries() const;
  std::uint64_t file_recoveries_now() const;

  const std::string path;
  TickLog log;  // the raw ticks, beside the file (tick_log.hpp)
  TickQueue queue;
  SeriesTable series;
  Cursors cursors;
  AlertLog alerts;
  ReadPool pool;
  // The minute the writer summarises in memory now (INT64_MAX: none), for readers.
  std::atomic<std::int64_t> open_minute{INT64_MAX};
  MinuteBoard board;
  Writer writer{queue, log, series, cursors, alerts, open_minute, board};

  // quick_check of the file opened, on a thread of its own (set_up_history()); the writer's.
  std::future<std::string> check;
  std::optional<std::string> verdict;

  mutable std::mutex recovery_mutex;
  std::uint64_t recovery_count = 0;   // files moved aside: history files and tick log files
  std::uint64_t file_recoveries = 0;  // history files moved aside (kMaxRecoveries)
  std::string recovery_note;
  void note_recovery(std::string note);  // one more recovery, and what was done
};

void Store::Impl::open_file() {
  // A history file made new here, not after a recovery: tick log files found beside it were
  // another file's, whose series ids they name.
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  const bool fresh = file_recoveries_now() == 0 && (ec || size == 0);
  writer.attach(open_history(path));
  sql::Connection& db = writer.db();
  try {
    check = set_up_history(db);
    if (fresh) log.clear();
    writer.prepare();
    if (file_recoveries_now() > 0)
      return;  // a new file after a recovery: the catalog is kept in memory
    cursors.load(db);
    alerts.load(db);
    series.load(db);
    writer.set_committed(series.size());
    // The series the file has not yet (committed at the hour's fold), from the log's newest
    // record that carries them.
    series.adopt(log.carried());
  } catch (const Malformed&) {
    if (file_recoveries_now() == 0)
      series.forget();  // after a recovery the catalog is the one in use
    writer.close();
    throw;
  } catch (const StoreError& e) {
    const int code = db.errcode();
    if (file_recoveries_now() == 0) series.forget();
    writer.close();
    if (sql::busy(code))  // history_vfs(): another agent, or a sqlite3 shell, has the file open
      throw StoreError(path +
                       ": in use by another process (the agent keeps its history file to "
                       "itself while it runs; stop that process or use another data_dir)");
    if (sql::malformed(code) && !dynamic_cast<const ForeignDatabase*>(&e))
      throw Malformed(e.what());
    throw;
  } catch (...) {
    writer.close();
    throw;
  }
}

// The damaged file goes aside (move_aside()) and a new one takes its place. The catalog, the
// queue, the minute in progress and the cursors stay in memory: the next commit writes the whole
// catalog (set_committed(0)) and every cursor to the new file, so ids stay the same.
void Store::Impl::recover(const std::string& why) {
  {
    std::lock_guard lock(recovery_mutex);
    if (file_recoveries >= kMaxRecoveries)
      throw StoreError(why + " (the history file was replaced " + std::to_string(file_recoveries) +
                       " times since start already; not again until a restart)");
  }
  if (check.valid()) check.wait();  // of the file going aside: moot
  check = {};
  verdict.reset();
  if (writer.is_open()) writer.close();
  std::string stamp;
  const std::string aside = move_aside(path, why, stamp);
  pool.discard();
  {
    std::lock_guard lock(recovery_mutex);
    ++file_recoveries;
  }
  note_recovery(
      why + "; moved to " + aside + " and a new history started at " + stamp +
      " (the summaries in the damaged file are not served; the raw ticks are in the tick log, and "
      "its minutes are summarised again)");
  try {
    open_file();
  } catch (const Malformed& e) {
    throw StoreError(std::string(e.what()) + " (a new file, just created)");
  }
  writer.set_committed(0);
  cursors.all_dirty();
  alerts.all_dirty();
}

void Store::Impl::note_recovery(std::string note) {
  std::lock_guard lock(recovery_mutex);
  ++recovery_count;
  recovery_note = std::move(note);
}

std::uint64_t Store::Impl::file_recoveries_now() const {
  std::lock_guard lock(recovery_mutex);
  return file_recoveries;
}

std::uint64_t Store::Impl::recoveries() const {
  std::lock_guard lock(recovery_mutex);
  return recovery_count;
}

std::optional<std::string> Store::Impl::check_verdict(bool wait) {
  if (check.valid() &&
      (wait || check.wait_for(std::chrono::seconds(0)) == std::future_status::ready))
    verdict = check.get();
  return verdict;
}

void Store::Impl::commit(const Cutoffs& cutoffs, int prune_rows) {
  if (!writer.is_open()) open_file();  // a recovery could not create the new file: again now
  if (const auto v = check_verdict(true); v && *v != "ok")
    throw Malformed(path + ": quick_check: " + *v);  // before anything is written to it
  try {
    writer.commit(cutoffs, prune_rows);
  } catch (...) {
    if (std::string note = log.take_note(); !note.empty()) note_recovery(std::move(note));
    throw;
  }
  if (std::string note = log.take_note(); !note.empty()) note_recovery(std::move(note));
}

Store::Store(std::string path) : impl_(std::make_unique<Impl>(std::move(path))) {
  try {
    impl_->open_file();
  } catch (const Malformed& e) {
    impl_->recover(e.what());
  }
}

Store::~Store() = default;

const std::string& Store::path() const {
  return impl_->path;
}

void Store::append(std::int64_t ts_ms, const std::vector<const MetricValue*>& metrics) {
  impl_->writer.append(ts_ms, metrics);
}

void Store::flush(const Cutoffs& cutoffs, int prune_rows) {
  try {
    impl_->commit(cutoffs, prune_rows);
  } catch (const Malformed& e) {
    impl_->recover(e.what());  // throws when it cannot (or may not) start a new file
    impl_->commit(cutoffs, prune_rows);
  }
}

bool Store::damage_found() {
  const auto v = impl_->check_verdict(false);
  return v && *v != "ok";
}

std::uint64_t Store::recoveries() const {
  return impl_->recoveries();
}

std::string Store::recovery_note() const {
  std::lock_guard lock(impl_->recovery_mutex);
  return impl_->recovery_note;
}

void Store::close_current_minute() {
  impl_->writer.close_current_minute();
}

std::size_t Store::pending_rows() const {
  return impl_->queue.size();
}

HistoryResult Store::query(const HistoryQuery& q) const {
  return run_query({impl_->pool, impl_->queue, impl_->series, impl_->open_minute, impl_->board}, q);
}

Store::Catalog Store::series() const {
  return impl_->series.view();
}

std::vector<Store::RawTick> Store::read_raw(std::int64_t after_ms, std::size_t max_values,
                                            bool* more) const {
  return kiwi::agent::read_raw(impl_->pool, impl_->queue, after_ms, max_values, more);
}

std::pair<std::uint64_t, std::int64_t> Store::ticks_after(std::int64_t after_ms) const {
  return kiwi::agent::ticks_after(impl_->pool, impl_->queue, after_ms);
}

std::optional<std::int64_t> Store::cursor(const std::string& output) const {
  return impl_->cursors.get(output);
}

void Store::set_cursor(const std::string& output, std::int64_t acked_ms) {
  impl_->cursors.set(output, acked_ms);
}

std::vector<Alert> Store::alert_states() const {
  return impl_->alerts.states();
}

void Store::set_alert_states(std::vector<Alert> alerts) {
  impl_->alerts.set_states(std::move(alerts));
}

std::uint64_t Store::log_alert_event(AlertNotice notice) {
  return impl_->alerts.append(std::move(notice));
}

std::vector<AlertNotice> Store::alert_events_after(std::uint64_t after, std::size_t max) const {
  return impl_->alerts.events_after(after, max);
}

std::uint64_t Store::newest_alert_event() const {
  return impl_->alerts.newest();
}

void Store::forget_alert_events(std::uint64_t through) {
  impl_->alerts.forget_through(through);
}

}  // namespace kiwi::agent
