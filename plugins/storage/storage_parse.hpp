// Pure functions for the storage sensor: /proc/self/mountinfo parsing, mount selection and the
// df arithmetic. No file I/O and no statvfs here, so all of it is tested on fixture text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiwi::storage {

// One line of /proc/self/mountinfo (see proc(5)), with octal escapes decoded.
struct MountEntry {
  std::string device;         // "major:minor", the same for every bind mount of a filesystem
  std::string root;           // path inside the filesystem that is mounted ("/" unless a bind)
  std::string mount_point;    // absolute, as the process sees it
  std::string mount_options;  // per-mount options, "rw,noatime"
  std::string fstype;         // "ext4", "fuse.sshfs"
  std::string source;         // "/dev/mmcblk0p2", "nas:/export"
  std::string super_options;  // per-filesystem options
  bool readonly = false;      // "ro" in the mount or the superblock options
};

// Decodes the kernel's octal escapes (\040 space, \011 tab, \012 newline, \134 backslash).
// Anything else is kept as is.
std::string decode_octal_escapes(std::string_view text);

// True if `option` is one of the comma-separated entries of `options` (exact match).
bool has_option(std::string_view options, std::string_view option);

// Parses mountinfo text. Throws std::invalid_argument naming the line number if a line lacks the
// " - " separator or required fields.
std::vector<MountEntry> parse_mountinfo(std::string_view text);

// True if `mount_point` is `prefix` or below it: "/dev" matches "/dev" and "/dev/shm", not
// "/devices". "/" matches everything.
bool under_path(std::string_view mount_point, std::string_view prefix);

// Which mounts are candidates: a mount is reported if its type matches one of include_types and
// none of exclude_types (globs, `*` any run of characters: "fuse.*"), and its mount point is under
// one of include_mounts and none of exclude_mounts (see under_path). Exclusion wins.
struct MountFilter {
  std::vector<std::string> include_types{"*"};
  std::vector<std::string> exclude_types;
  std::vector<std::string> include_mounts{"/"};
  std::vector<std::string> exclude_mounts;
};

// The mounts worth reporting, in mountinfo order:
//  - those `filter` lets through;
//  - a mount point mounted over keeps only the last (visible) entry;
//  - a filesystem mounted more than once (bind mounts) keeps only its shortest mount point, the
//    first of equals, so its space is reported once.
std::vector<MountEntry> select_mounts(std::vector<MountEntry> mounts, const MountFilter& filter);

// Filesystem types whose statvfs the kernel answers from in-memory superblock counters, without
// I/O or a server, so it cannot hang: the sensor calls it inline. Every other type (nfs, cifs,
// fuse.*, 9p, vfat, which may read its FAT once, ...) runs on a thread bounded by statvfs_timeout.
bool statvfs_answers_from_memory(std::string_view fstype);

// The statvfs fields the sensor needs, in a plain struct so tests can fake them.
struct FsStats {
  std::uint64_t block_size = 0;    // f_frsize (f_bsize if f_frsize is 0)
  std::uint64_t blocks = 0;        // f_blocks
  std::uint64_t blocks_free = 0;   // f_bfree, including the root reserve
  std::uint64_t blocks_avail = 0;  // f_bavail, what unprivileged users may still write
  std::uint64_t inodes = 0;        // f_files
  std::uint64_t inodes_free = 0;   // f_ffree
};

struct FsUsage {
  double size_bytes = 0;
  double available_bytes = 0;
  double used_bytes = 0;
  double used_ratio = 0;  // used / (used + available), as df's Use%, so the root reserve counts
  double inodes_total = 0;
  double inodes_free = 0;
};

FsUsage compute_usage(const FsStats& stats);

}  // namespace kiwi::storage
