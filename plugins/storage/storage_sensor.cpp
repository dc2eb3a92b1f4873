#include "storage_sensor.hpp"

#include <poll.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <condition_variable>
#include <kiwi/io.hpp>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace kiwi::storage {

// statvfs on a hard-mounted NFS share whose server is gone blocks in the kernel, uninterruptibly
// and for as long as the server is away. So every call that could block runs on its own thread and
// the sensor waits only until a deadline; a call that misses it is abandoned (the thread ends
// whenever the kernel lets it) and holds this shared state, never the sensor. Local disk
// filesystems answer from memory (statvfs_answers_from_memory) and are called inline: no thread
// per mount per sample on the usual board.
struct StorageSensor::Call {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  FsStats stats{};
  std::string error;  // what() of a failure; empty on success
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  bool finished() {
    std::lock_guard lock(mutex);
    return done;
  }
};

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

FsStats statvfs_stats(const std::string& path) {
  struct statvfs v {};
  if (::statvfs(path.c_str(), &v) != 0)
    throw std::system_error(errno, std::generic_category(), "statvfs " + path);
  return {
      v.f_frsize ? v.f_frsize : v.f_bsize, v.f_blocks, v.f_bfree, v.f_bavail, v.f_files, v.f_ffree};
}

StorageSensor::StorageSensor(const kiwi::SensorContext& ctx) : StorageSensor(ctx, statvfs_stats) {}

StorageSensor::StorageSensor(const kiwi::SensorContext& ctx, StatFunction stat)
    : procfs_(ctx.procfs),
      filter_{ctx.options.get_strings("include_types"), ctx.options.get_strings("exclude_types"),
              ctx.options.get_strings("include_mounts"), ctx.options.get_strings("exclude_mounts")},
      timeout_(ctx.options.get_duration("statvfs_timeout")),
      rootfs_(ctx.options.get_string("rootfs")),
      stat_(std::move(stat)),
      log_(ctx.log),
      keep_loaded_(ctx.keep_loaded) {}

StorageSensor::~StorageSensor() {
  if (mountinfo_fd_ >= 0) ::close(mountinfo_fd_);
}

std::shared_ptr<StorageSensor::Call> StorageSensor::start_call(const MountEntry& mount) const {
  auto call = std::make_shared<Call>();
  std::string path =
      rootfs_ == "/" ? mount.mount_point : kiwi::join_path(rootfs_, mount.mount_point);
  if (statvfs_answers_from_memory(mount.fstype))
    run_call(*call, stat_, path);
  else
    std::thread([call, stat = stat_, path = std::move(path)] {
      run_call(*call, stat, path);
    }).detach();
  return call;
}

void StorageSensor::run_call(Call& call, const StatFunction& stat, const std::string& path) {
  FsStats stats{};
  std::string error;
  try {
    stats = stat(path);
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "statvfs " + path + ": unknown exception";
  }
  std::lock_guard lock(call.mutex);
  call.stats = stats;
  call.error = std::move(error);
  call.done = true;
  call.cv.notify_all();
}

namespace {
constexpr long kProcSuperMagic = 0x9fa0;  // PROC_SUPER_MAGIC
}  // namespace

const std::vector<MountEntry>& StorageSensor::current_mounts() {
  const std::string path = kiwi::join_path(procfs_, "self/mountinfo");
  if (mountinfo_fd_ < 0) {
    int fd = kiwi::open_file(path);  // a regular file, or -1 if absent (then read_required_file)
    struct statfs fs {};
    if (fd >= 0 && ::fstatfs(fd, &fs) == 0 && fs.f_type == kProcSuperMagic)
      mountinfo_fd_ = fd;
    else if (fd >= 0)
      ::close(fd);
  }
  std::optional<std::string> text;
  if (mountinfo_fd_ >= 0) {
    // POLLPRI once per change of the mount table since the last poll (mounts_poll in the kernel).
    pollfd p{mountinfo_fd_, POLLPRI, 0};
    const int ready = ::poll(&p, 1, 0);  // 0: nothing to report (POLLIN is not asked for)
    const bool changed = ready < 0 || (ready > 0 && (p.revents & (POLLPRI | POLLERR)) != 0);
    if (mounts_valid_ && !changed) return mounts_;
    text = kiwi::read_open_file(mountinfo_fd_, path, kiwi::kMountTableReadCap);
  } else {
    text = kiwi::read_required_file(path, kiwi::kMountTableReadCap);
  }
  mounts_valid_ = false;
  mounts_ = kiwi::parse_file(path, [&] { return select_mounts(parse_mountinfo(*text), filter_); });
  mounts_valid_ = true;
  return mounts_;
}

kiwi::SampleResult StorageSensor::sample(kiwi::MetricSink& sink) {
  const std::vector<MountEntry>& mounts = current_mounts();

  // Start every statvfs at once and wait for all of them against one deadline, so a sample takes
  // at most statvfs_timeout however many mounts hang.
  const auto deadline = Clock::now() + timeout_;
  std::vector<std::shared_ptr<Call>> calls;
  std::vector<bool> asked_before;  // the call is one still hanging from an earlier sample
  for (const auto& m : mounts) {
    auto hung = hung_.find(m.mount_point);
    if (hung != hung_.end() && !hung->second->finished()) {
      calls.push_back(hung->second);
      asked_before.push_back(true);
      continue;
    }
    if (hung != hung_.end()) hung_.erase(hung);  // it returned at last: ask afresh
    calls.push_back(start_call(m));
    asked_before.push_back(false);
  }
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (asked_before[i]) continue;
    std::unique_lock lock(calls[i]->mutex);
    calls[i]->cv.wait_until(lock, deadline, [&] { return calls[i]->done; });
  }

  std::size_t reported = 0;
  std::vector<std::string> failed;
  std::set<std::string> failing_now;
  for (std::size_t i = 0; i < mounts.size(); ++i) {
    const MountEntry& m = mounts[i];
    Call& call = *calls[i];
    std::string error;
    FsStats stats{};
    bool missed_deadline = false;
    {
      std::lock_guard lock(call.mutex);
      if (call.done) {
        error = call.error;
        stats = call.stats;
      } else if (asked_before[i]) {
        const auto waited =
            std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - call.started);
        error = "statvfs " + m.mount_point + ": still no answer after " +
                std::to_string(waited.count()) + " s, not asked again until it returns";
      } else {
        missed_deadline = true;
        error = "statvfs " + m.mount_point + ": no answer within " +
                std::to_string(timeout_.count()) +
                " ms (a network filesystem whose server is away?)";
      }
    }
    if (missed_deadline) {
      hung_[m.mount_point] = calls[i];
      keep_loaded_();  // the thread may return after this sensor, and the plugin, are gone
    }
    if (!error.empty()) {
      // EACCES on a private mount, ESTALE or a hang from a gone NFS server: skip it, keep the
      // others.
      failed.push_back(m.mount_point + " (" + error + ")");
      failing_now.insert(m.mount_point);
      if (!failing_.count(m.mount_point)) log_.warn("storage: skipped " + failed.back());
      sink.emit(kError, {m.mount_point}, 1);
      continue;
    }
    if (stats.blocks == 0) continue;  // a pseudo filesystem the type list missed; df hides these
    const FsUsage usage = compute_usage(stats);
    for (const auto& u : kUsageMetrics) sink.emit(u.metric, {m.mount_point}, usage.*u.field);
    sink.emit(kReadonly, {m.mount_point}, m.readonly ? 1 : 0);
    sink.emit(kError, {m.mount_point}, 0);
    ++reported;
  }
  for (const auto& mount : failing_)
    if (!failing_now.count(mount)) log_.info("storage: statvfs works again on " + mount);
  failing_ = std::move(failing_now);
  // Hung calls of mounts that are no longer listed (unmounted, excluded) need no watching.
  std::erase_if(hung_, [&](const auto& entry) {
    return std::none_of(mounts.begin(), mounts.end(),
                        [&](const MountEntry& m) { return m.mount_point == entry.first; });
  });

  if (reported == 0 && !failed.empty())
    throw std::runtime_error("statvfs failed on every mount: " + join(failed));
  if (reported == 0)
    return kiwi::SampleResult::no_data(
        "no mounts left after the include/exclude options and empty filesystems");
  return kiwi::SampleResult::ok(failed.empty() ? "" : "skipped " + join(failed));
}

}  // namespace kiwi::storage
