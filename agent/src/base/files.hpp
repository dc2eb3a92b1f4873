// The files and directories the agent creates itself (the data directory, the database, the
// snapshot file and its lock): one mode rule and one way to create each, so that no other user
// can write them or make the agent write through a name they planted.
//
// - Directories are 0755 and files 0644 whatever the umask the agent was started with (0777 and
//   0666 under umask 000 let every user replace them; 0700 under umask 077 would hide the snapshot
//   file from the scripts it is for).
// - Nothing is opened through a symbolic link or a name another user could have created first:
//   new files are created with O_EXCL (a temporary file by mkstemp), existing ones opened with
//   O_NOFOLLOW.
// - A directory the agent writes in must be writable by the agent's user alone
//   (require_private_directory): in a directory others can write, they could replace any name in
//   it between two of the agent's calls.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

namespace kiwi::agent {

inline constexpr mode_t kDirectoryMode = 0755;
inline constexpr mode_t kFileMode = 0644;

// A directory the agent would write in that another user can write too (its message says which
// directory, its owner and mode, and how to fix it).
struct UnsafeDirectory : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Creates `dir` and any missing parents, each new one kDirectoryMode whatever the umask.
// An existing directory is left as it is. Throws std::system_error naming the path that failed.
void make_directories(const std::filesystem::path& dir);

// Throws UnsafeDirectory unless `dir` (which must exist) can be written by the agent's user alone:
// owned by it or by root, and writable neither by every user nor by a group other than the
// agent's own. Its parents must be owned by root or the agent's user and writable by nobody else
// either, except with the sticky bit (as /tmp: others may add names there, but not rename or
// remove this directory). `what` starts the message ("snapshot file /run/x/current.json").
void require_private_directory(const std::filesystem::path& dir, std::string_view what);

// Opens `path` read-write, creating it kFileMode if it does not exist (O_EXCL: a name planted
// meanwhile fails instead of being followed). An existing file is opened O_NOFOLLOW and must be a
// regular file. Returns the descriptor (O_CLOEXEC); throws std::system_error naming the path.
int open_or_create_file(const std::string& path);

// Creates `path` (kFileMode, empty) unless something of that name exists; never follows a
// symbolic link. Throws std::system_error naming the path.
void create_file_if_absent(const std::string& path);

// Writes `path` so that a reader sees the old or the new content, never a mix: a new temporary
// file "<path>.tmp.XXXXXX" (mkstemp, kFileMode) in the same directory, then rename(). Throws
// std::system_error naming the path; the temporary file is removed on any failure.
void write_file_atomically(const std::string& path, std::string_view content);

// Removes the temporary files write_file_atomically(path, ...) leaves when the process dies
// between creating and renaming one (kill -9, a crash). Only names "<path>.tmp.XXXXXX" go.
void remove_stale_temporary_files(const std::string& path);

}  // namespace kiwi::agent
