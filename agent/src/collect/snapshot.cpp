#include "collect/snapshot.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "base/files.hpp"

namespace kiwi::agent {

namespace {

// The pid a lock file holds ("1234\n"), 0 if none.
long pid_in(int fd) {
  char text[32] = {};
  (void)!::pread(fd, text, sizeof text - 1, 0);
  char* end = nullptr;
  const long pid = std::strtol(text, &end, 10);
  return end != text && pid > 0 ? pid : 0;
}

}  // namespace

long SnapshotFile::holder(const std::string& path) {
  const int fd = ::open((path + ".lock").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  // Held by a running agent when it cannot be taken; taken, it is let go at once.
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  const long pid = held ? pid_in(fd) : 0;
  ::close(fd);
  return pid;
}

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
    const long pid = pid_in(lock_fd_);
    ::close(lock_fd_);
    lock_fd_ = -1;
    if (err == EWOULDBLOCK)
      throw SnapshotFileInUse(
          "snapshot file " + path_ + " is in use by another kiwi-agent" +
          (pid ? " (pid " + std::to_string(pid) + ")" : "") +
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
