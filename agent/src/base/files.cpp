#include "base/files.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <system_error>
#include <vector>

namespace kiwi::agent {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(int err, const std::string& path) {
  throw std::system_error(err, std::generic_category(), path);
}

std::string octal_mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// Why another user can write `st`'s directory, or "" if none can. `sticky_ok`: a sticky directory
// writable by all is accepted (a parent such as /tmp).
std::string writable_by_others(const struct stat& st, bool sticky_ok) {
  const uid_t me = ::geteuid();
  if (st.st_uid != me && st.st_uid != 0)
    return "is owned by uid " + std::to_string(st.st_uid) + ", not the agent's user (uid " +
           std::to_string(me) + ") or root";
  if (sticky_ok && (st.st_mode & S_ISVTX)) return "";
  if (st.st_mode & S_IWOTH)
    return "is writable by every user (mode " + octal_mode(st.st_mode) + ")";
  if ((st.st_mode & S_IWGRP) && st.st_gid != ::getegid())
    return "is writable by group " + std::to_string(st.st_gid) + " (mode " +
           octal_mode(st.st_mode) + "), not only by the agent's user";
  return "";
}

}  // namespace

void make_directories(const fs::path& dir) {
  // The missing part of the path, outermost first.
  std::vector<fs::path> missing;
  for (fs::path p = dir; !p.empty(); p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0) break;
    if (errno != ENOENT) fail(errno, p.string());
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (::mkdir(it->c_str(), kDirectoryMode) != 0) {
      if (errno == EEXIST && fs::is_directory(*it)) continue;  // made meanwhile: not ours
      fail(errno, it->string());
    }
    // The umask took bits off (or, at 000, none): set the mode on the directory just made,
    // through a descriptor, so a name swapped in meanwhile is not followed.
    const int fd = ::open(it->c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) fail(errno, it->string());
    const int rc = ::fchmod(fd, kDirectoryMode);
    const int err = errno;
    ::close(fd);
    if (rc != 0) fail(err, it->string());
  }
}

void require_private_directory(const fs::path& dir, std::string_view what) {
  std::error_code ec;
  const fs::path full = fs::absolute(dir, ec);
  if (ec) fail(ec.value(), dir.string());
  bool innermost = true;
  for (fs::path p = full; !p.empty(); p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) fail(errno, p.string());
    if (auto why = writable_by_others(st, !innermost); !why.empty())
      throw UnsafeDirectory(std::string(what) + ": directory " + p.string() + " " + why +
                            ": another user could replace the files the agent writes there; " +
                            "make it writable by the agent's user alone (chmod go-w " + p.string() +
                            ") or choose a directory that is");
    innermost = false;
    if (p == p.parent_path()) break;
  }
}

int open_or_create_file(const std::string& path) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, kFileMode);
    if (fd >= 0) {
      if (::fchmod(fd, kFileMode) != 0) {
        const int err = errno;
        ::close(fd);
        fail(err, path);
      }
      return fd;
    }
    if (errno != EEXIST) fail(errno, path);
    fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) continue;  // removed meanwhile: create it again
    if (fd < 0 && errno == ELOOP) fail(ELOOP, path + " is a symbolic link (not followed)");
    if (fd < 0) fail(errno, path);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      fail(EINVAL, path + " (not a regular file)");
    }
    return fd;
  }
  fail(EAGAIN, path);
}

void create_file_if_absent(const std::string& path) {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, kFileMode);
  if (fd < 0) {
    if (errno == EEXIST) return;
    fail(errno, path);
  }
  const int rc = ::fchmod(fd, kFileMode);
  const int err = errno;
  ::close(fd);
  if (rc != 0) fail(err, path);
}

void write_file_atomically(const std::string& path, std::string_view content) {
  std::string tmp = path + ".tmp.XXXXXX";
  // mkostemp: a new name, O_EXCL, mode 0600; never a file or link someone else made.
  int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) fail(errno, path + ".tmp.XXXXXX");
  auto abandon = [&](int err, const std::string& what) {
    ::close(fd);
    ::unlink(tmp.c_str());
    fail(err, what);
  };
  if (::fchmod(fd, kFileMode) != 0) abandon(errno, tmp);
  std::size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) abandon(errno, tmp);
    done += static_cast<std::size_t>(n);
  }
  // No fsync: the file lives on tmpfs by default and is rewritten every tick; rename() alone
  // guarantees readers never see a half-written file.
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(err, tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(err, path);
  }
}

void remove_stale_temporary_files(const std::string& path) {
  const fs::path p(path);
  const std::string prefix = p.filename().string() + ".tmp.";
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name(e->d_name);
    if (name.size() == prefix.size() + 6 && name.starts_with(prefix))
      ::unlinkat(::dirfd(d), e->d_name, 0);  // removes a link itself, never what it points to
  }
  ::closedir(d);
}

}  // namespace kiwi::agent
