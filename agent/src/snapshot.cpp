#include "snapshot.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace kiwi::agent {

void write_file_atomically(const std::string& path, std::string_view content) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), tmp);
  std::size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw std::system_error(err, std::generic_category(), tmp);
    }
    done += static_cast<std::size_t>(n);
  }
  // No fsync: the file lives on tmpfs by default and is rewritten every tick; rename() alone
  // guarantees readers never see a half-written file.
  if (::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw std::system_error(err, std::generic_category(), path);
  }
}

SnapshotFile::SnapshotFile(std::string path) : path_(std::move(path)) {
  const auto dir = std::filesystem::path(path_).parent_path();
  std::error_code ec;
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  if (ec)
    throw std::runtime_error("snapshot file " + path_ + ": cannot create " + dir.string() + ": " +
                             ec.message());
  const std::string lock = path_ + ".lock";
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0)
    throw std::runtime_error("snapshot file " + path_ + ": cannot open " + lock + ": " +
                             std::strerror(errno));
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
}

SnapshotFile::~SnapshotFile() {
  // The file goes before the lock: another agent may take the path as soon as it is unlocked. The
  // lock file stays (removing it would let two agents lock two different files of one name).
  ::unlink(path_.c_str());
  ::unlink((path_ + ".tmp").c_str());
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

SnapshotHolder::SnapshotHolder() : current_(std::make_shared<const Snapshot>()) {}

}  // namespace kiwi::agent
