// The latest sample: published for the HTTP workers (the current handler renders /api/current
// from it), and written atomically to a file for scripts (kiwi/json.hpp render_snapshot_json).
#pragma once

#include <atomic>
#include <kiwi/model.hpp>
#include <memory>
#include <stdexcept>

#include "base/files.hpp"

namespace kiwi::agent {

// The snapshot file of one running agent (`collector.snapshot_path`). Holds an exclusive lock
// (flock on "<path>.lock", which records the holder's pid) for its life, so a second agent given
// the same path refuses to start instead of overwriting the first one's file; removes the file
// when destroyed (a clean stop), so a file left behind is never mistaken for a live sample.
// The path is locked by another running agent, or its directory is writable by another user
// (UnsafeDirectory, files.hpp): start-up stops (exit 1). Other failures to set up the file (an
// uncreatable directory) only turn the snapshot file off.
struct SnapshotFileInUse : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class SnapshotFile {
 public:
  // Creates the directory if needed (files.hpp modes), checks no other user can write it, takes
  // the lock and removes temporary files a killed agent left. Throws SnapshotFileInUse naming the
  // path and the other agent's pid, UnsafeDirectory, or std::runtime_error naming the path for
  // any other failure.
  explicit SnapshotFile(std::string path);
  ~SnapshotFile();
  SnapshotFile(const SnapshotFile&) = delete;
  SnapshotFile& operator=(const SnapshotFile&) = delete;

  // The pid of the agent that holds the lock of the snapshot file `path` (the one it wrote into
  // <path>.lock), or 0 when none does: the lock is free, or there is no lock file.
  static long holder(const std::string& path);

  // write_file_atomically(path, content); throws std::system_error.
  void write(std::string_view content) const { write_file_atomically(path_, content); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int lock_fd_ = -1;
};

class SnapshotHolder {
 public:
  SnapshotHolder();
  void publish(std::shared_ptr<const Snapshot> s) { current_.store(std::move(s)); }
  std::shared_ptr<const Snapshot> current() const { return current_.load(); }

 private:
  std::atomic<std::shared_ptr<const Snapshot>> current_;
};

}  // namespace kiwi::agent
