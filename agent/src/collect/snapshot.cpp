#include "collect/snapshot.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "base/files.hpp"

namespace kiwi::agent {

SnapshotFile::SnapshotFile(std::string path) : path_(std::move(path)) {
  auto dir = std::filesystem::path(path_).parent_path();
  if (dir.empty()) dir = ".";
  try {
    make_directories(dir);
  } catch (const std::system_error& e) {
    throw std::runtime_error("snapshot file " + path_ + ": cannot create " + dir.string() + ": " +
                             e.code().message());
  }
  require_private_directory(dir, "snapshot file " + path_);
  const std::string lock = path_ + ".lock";
  try {
    lock_fd_ = open_or_create_file(lock);
  } catch (const std::system_error& e) {
    throw std::runtime_error("snapshot file " + path_ + ": cannot open " + e.what());
  }
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char pid[32] = {};
    (void)!::pread(lock_fd_, pid, sizeof pid - 1, 0);
    ::close(lock_fd_);
    lock_fd_ = -1;
    std::string holder(pid);
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    if (err == EWOULDBLOCK)
      throw SnapshotFileInUse(
          "snapshot file " + path_ + " is in use by another kiwi-agent" +
          (holder.empty() ? "" : " (pid " + holder + ")") +
          "; give each agent its own [collector] snapshot_path and [agent] data_dir");
    throw std::runtime_error("snapshot file " + path_ + ": cannot lock " + lock + ": " +
                             std::strerror(err));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(lock_fd_, 0) == 0) (void)!::pwrite(lock_fd_, pid.data(), pid.size(), 0);
  // Ours now: what a killed agent left half-written goes.
  remove_stale_temporary_files(path_);
}

SnapshotFile::~SnapshotFile() {
  // The file goes before the lock: another agent may take the path as soon as it is unlocked. The
  // lock file stays (removing it would let two agents lock two different files of one name).
  ::unlink(path_.c_str());
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

SnapshotHolder::SnapshotHolder() : current_(std::make_shared<const Snapshot>()) {}

}  // namespace kiwi::agent
