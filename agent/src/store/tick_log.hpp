// The raw ticks of schema 6 on: a commit's ticks as one block (sample_codec::pack_block), appended
// to a file of the hour the block starts in, in a directory beside the history file:
// `<path>-ticks/<hour start, unix seconds>.ticks`. Pruned by whole files: up to kSpares of them
// are kept as `<hour>.spare` and renamed to the next new hours' files (recycled; only to a later
// hour than the spare's, so a file's hours only rise), the rest deleted. A recycled file's blocks
// are the filesystem's already, so an append overwrites them: on ext4 an append that grows a file
// also makes the journal write the inode, its extents and the allocation at each sync
// (tools/bench/write_cost.py: a 4.7 kB record sent 32 KiB to the device appended into blocks taken
// ahead, 16-23 KiB written over a recycled file's).
//
// A file is a run of records, each:
//   magic u32 "kTk1" | size u32 (of the block) | ts i64 (first tick, unix ms) | last i64 (last
//   tick) | ticks u32 | crc u32 (CRC-32 of the 28 bytes before it and the block) | the block
// where "the block" (size, CRC) is the record's payload: the block itself, or, in a record that
// carries catalog rows (series the history file does not have yet, SeriesTable::carry()),
// kCarried, varint(n), those n bytes, then the block. A block never starts with kCarried
// (sample_codec's blocks start with 0x00, 0x02 or 0x03).
// little-endian, 32 bytes of header, each record at a multiple of 4 KiB (kAlign; what is between
// two is not read): an append then writes only pages of its own, not again the one the record
// before it ended in. A file's records are those of its hour (ts in it), from its start on: the
// first header that is not one of the hour ends the file, unless a whole record of the hour
// follows at a later page (then it is damage, below); what a recycled file held before (records
// of another hour, or the inside of one) is never read. Records follow in the order they were
// written: in ts order,
// unless the wall clock went back (a block of an hour already written goes to that hour's file,
// after its others); readers sort each file's records by ts, and of two with the same ts read the
// later-written (as the table's INSERT OR REPLACE kept it).
//
// Crash safety: a record is written with one write() and fdatasync()ed before the commit returns;
// it carries every series its ticks may name that the history file has not committed yet (the
// writer commits them to SQLite at the hour's fold), and the agent takes them back from the newest
// carrying record at open (carried()). kill -9 or a power cut in the middle of an append leaves a
// torn last record: readers skip it (its size runs past the end, or its CRC fails), and the
// writer's next append to that file goes where it starts, over it. A record damaged in the middle
// of a file (its CRC fails) reads as missing, as a block that does not unpack did; one whose
// header is not a header, or whose size runs over, with a whole record of the hour after it (the
// rest of the file cannot be framed) makes the writer move the file aside as
// `<name>.corrupt-<UTC time>`,
// reported like a damaged history file (take_note()), and start the hour's file anew.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace kiwi::agent {

class TickLog {
 public:
  explicit TickLog(std::string dir) : dir_(std::move(dir)) {}
  ~TickLog();
  TickLog(const TickLog&) = delete;
  TickLog& operator=(const TickLog&) = delete;
  const std::string& dir() const { return dir_; }

  // Writer side (one thread). Throws StoreError naming the file.
  // Appends the block of `ticks` ticks from ts to last to ts's hour's file and syncs it; creates
  // the directory and the file as needed. On failure the file is cut back to where it was.
  // `carry`: catalog rows the record carries ("": none), whose first varint only rises from
  // record to record (carried()).
  void append(std::int64_t ts, std::int64_t last, std::uint32_t ticks, std::string_view carry,
              std::string_view block);
  void append(std::int64_t ts, std::int64_t last, std::uint32_t ticks, std::string_view block) {
    append(ts, last, ticks, {}, block);
  }
  // Blocks whose every tick is before `cut` read as gone from now on; files holding only such
  // blocks leave the log: kept as spares while there are fewer than kSpares, else deleted.
  // Returns how many files left it.
  int prune(std::int64_t cut);
  // Deletes every file, spares too (the history file is new: they were another one's, with other
  // series ids).
  void clear();
  // What the writer found damaged and moved aside since the last call ("" if nothing).
  std::string take_note();

  // Reader side, any thread. Throws StoreError when the directory or a file cannot be read.
  struct Block {
    std::int64_t ts, last;
    std::uint32_t ticks;
    std::string_view data;  // valid until the callback returns
  };
  // Calls fn(block) for every block with ts <= to and last >= from, in ts order (newest first if
  // `newest_first`), until fn returns false.
  void blocks(std::int64_t from, std::int64_t to, bool newest_first,
              const std::function<bool(const Block&)>& fn) const;
  // The ts of the oldest block (INT64_MAX if none).
  std::int64_t oldest() const;
  // The catalog rows of the intact record whose carry's first varint is the largest ("" if no
  // record carries any): the rows the history file may lack. Reads every file's headers, and
  // whole only the record it returns (and any found damaged on the way).
  std::string carried() const;

  static constexpr std::size_t kHeaderBytes = 32;
  static constexpr std::uint32_t kMagic = 0x316b546b;  // "kTk1" little-endian
  static constexpr std::size_t kAlign = 4096;          // a record starts at a multiple of it
  static constexpr std::size_t kPreallocate = 32 * 1024;
  static constexpr std::size_t kSpares = 2;  // pruned files kept for hours to come, at most
  static constexpr char kCarried = 0x04;     // a payload that starts with carried catalog rows

 private:
  struct Listing {
    std::vector<std::int64_t> hours;   // that have a file, oldest first
    std::vector<std::int64_t> spares;  // of the spare files (the hour each was)
  };
  Listing list() const;
  std::vector<std::int64_t> hours() const;  // list().hours
  std::string file_of(std::int64_t hour) const;
  std::string spare_of(std::int64_t hour) const;
  // Renames a spare (not one of `hour`) to `path`; false if there is none.
  bool recycle_into(const std::string& path, std::int64_t hour);
  void open_for_append(std::int64_t hour);  // writer: fd_ on hour's file, its tail checked
  void close_fd();

  const std::string dir_;
  int fd_ = -1;
  std::int64_t fd_hour_ = INT64_MIN;
  std::size_t fd_size_ = 0;       // where its last record ends
  std::size_t fd_allocated_ = 0;  // how far its blocks are taken (fallocate)
  bool dir_made_ = false;
  std::atomic<std::int64_t> floor_{INT64_MIN};  // blocks with last < floor_ read as gone
  std::mutex note_mutex_;
  std::string note_;
};

}  // namespace kiwi::agent
