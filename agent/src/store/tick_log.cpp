#include "store/tick_log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>  // renameat2
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "base/compress.hpp"
#include "base/files.hpp"
#include "store/millis.hpp"
#include "store/sample_codec.hpp"
#include "store/schema.hpp"
#include "store/sqlite.hpp"
#include "store/store.hpp"

namespace kiwi::agent {

namespace {

namespace fs = std::filesystem;
constexpr std::string_view kSuffix = ".ticks";
constexpr std::string_view kSpareSuffix = ".spare";  // a pruned file kept to be recycled

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>(v >> (8 * i));
}
void put_i64(std::string& out, std::int64_t v) {
  const auto u = static_cast<std::uint64_t>(v);
  for (int i = 0; i < 8; ++i) out += static_cast<char>(u >> (8 * i));
}
std::uint64_t get(std::string_view s, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}

struct Record {
  std::int64_t ts, last;
  std::uint32_t ticks;
  std::size_t at;    // of its header in the file
  std::size_t size;  // of its block
  std::uint32_t crc;
  std::string_view block(std::string_view file) const {
    return file.substr(at + TickLog::kHeaderBytes, size);
  }
  bool intact(std::string_view file) const {
    return crc32_of(block(file), crc32_of(file.substr(at, 28))) == crc;
  }
};

// A record's payload as its carried catalog rows ("" if none) and its block; false if its carry
// does not frame.
bool split_payload(std::string_view payload, std::string_view& carry, std::string_view& block) {
  carry = {};
  block = payload;
  if (payload.empty() || payload.front() != TickLog::kCarried) return true;
  payload.remove_prefix(1);
  std::uint64_t n = 0;
  if (!sample_codec::get_varint(payload, n) || n > payload.size()) return false;
  carry = payload.substr(0, n);
  block = payload.substr(n);
  return true;
}

// What follows the last record of the file: nothing (its end, or what a recycled file held before:
// records of another hour, or the inside of one), a record cut short (a torn append), or bytes
// that are no record's header with a record of the file's hour after them (damage).
enum class Tail { none, torn, garbage };

std::size_t align_up(std::size_t n) {
  return (n + TickLog::kAlign - 1) / TickLog::kAlign * TickLog::kAlign;
}

// Where the record after one of `size` bytes of block starting at `at` starts.
std::size_t next_record(std::size_t at, std::size_t size) {
  return align_up(at + TickLog::kHeaderBytes + size);
}

// The header at `at` (kHeaderBytes of it in `file` from there): a record of the hour starting
// at `hour` (its magic, and a first tick in that hour: every block goes to its own hour's file),
// which may still be cut short.
bool of_hour(std::string_view file, std::size_t at, std::int64_t hour) {
  if (get(file, at, 4) != TickLog::kMagic) return false;
  const auto ts = static_cast<std::int64_t>(get(file, at + 8, 8));
  return ts >= hour &&
         static_cast<std::uint64_t>(ts) - static_cast<std::uint64_t>(hour) < Store::kHourMs;
}

Record record_at(std::string_view file, std::size_t at) {
  return Record{static_cast<std::int64_t>(get(file, at + 8, 8)),
                static_cast<std::int64_t>(get(file, at + 16, 8)),
                static_cast<std::uint32_t>(get(file, at + 24, 4)),
                at,
                static_cast<std::size_t>(get(file, at + 4, 4)),
                static_cast<std::uint32_t>(get(file, at + 28, 4))};
}

// Whether a whole record of the hour (its CRC holding) starts at a page from `from` on.
bool intact_after(std::string_view file, std::int64_t hour, std::size_t from) {
  for (std::size_t q = from; q + TickLog::kHeaderBytes <= file.size(); q += TickLog::kAlign) {
    if (!of_hour(file, q, hour)) continue;
    const Record r = record_at(file, q);
    if (r.size <= file.size() - q - TickLog::kHeaderBytes && r.intact(file)) return true;
  }
  return false;
}

// The records of `file`, the file of the hour starting at `hour`, as far as they frame; `end` is
// where the next append goes: where the last one ends (0: none), or where it starts if it fails
// its CRC (an append cut short: the size written, not all of the block); `stop` where framing
// stopped (the file's size, or the start of what is not a record of the hour, or of the damaged
// record).
Tail frame(std::string_view file, std::int64_t hour, std::vector<Record>& out, std::size_t& end,
           std::size_t& stop) {
  out.clear();
  end = 0;
  std::size_t at = 0;
  Tail tail = Tail::none;
  while (at < file.size()) {
    if (file.size() - at < TickLog::kHeaderBytes) {
      tail = Tail::torn;
      break;
    }
    if (!of_hour(file, at, hour)) {
      // Damage if the file does not start with a record (a recycled one starts with one of the
      // hour it was) or a whole record of the hour follows at a later page; else the end: a
      // recycled file (TickLog::prune) goes on with what it held before, never of this hour.
      if ((at == 0 && get(file, 0, 4) != TickLog::kMagic) ||
          intact_after(file, hour, at + TickLog::kAlign))
        tail = Tail::garbage;
      break;
    }
    const Record r = record_at(file, at);
    if (r.size > file.size() - at - TickLog::kHeaderBytes) {
      tail = Tail::torn;
      break;
    }
    out.push_back(r);
    end = at + TickLog::kHeaderBytes + r.size;
    at = next_record(at, r.size);
  }
  stop = std::min(at, file.size());
  // A last record cut short, or failing its CRC, is a torn append, unless a whole record of the
  // hour follows it: then its size was what was damaged, and what it hid is damage too.
  if (tail != Tail::garbage) {
    std::size_t last = std::string_view::npos;
    if (tail == Tail::torn) {
      last = at;
    } else if (!out.empty() && !out.back().intact(file)) {
      last = out.back().at;
      end = last;
    }
    if (last != std::string_view::npos && intact_after(file, hour, last + TickLog::kAlign)) {
      tail = Tail::garbage;
      stop = last;
    }
  }
  return tail;
}

// Opens a file of the log to read, without updating its access time where the agent owns it
// (O_NOATIME; EPERM otherwise): under relatime the first read after each append would rewrite
// the inode, a 4 KiB block of the filesystem per commit (measured: 120 kB an hour).
int open_to_read(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOATIME);
  if (fd < 0 && errno == EPERM) fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  return fd;
}

// Calls fn(at, bytes) for each record header of the file `fd`, the file of the hour starting at
// `hour`, in file order, as far as the headers frame (frame()'s end: the first that is not one of
// the hour), until fn returns false; `bytes` is the header and up to `extra` bytes after it.
template <class Fn>
void each_header(int fd, std::int64_t hour, std::size_t extra, Fn&& fn) {
  std::string h(TickLog::kHeaderBytes + extra, '\0');
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, h.data(), h.size(), at);
    if (n < static_cast<ssize_t>(TickLog::kHeaderBytes)) break;
    const std::string_view v(h.data(), static_cast<std::size_t>(n));
    if (!of_hour(v, 0, hour) || !fn(static_cast<std::size_t>(at), v)) break;
    at = static_cast<off_t>(next_record(static_cast<std::size_t>(at), get(v, 4, 4)));
  }
}

// The whole of `path` into `out`; false if it does not exist (pruned meanwhile).
bool read_whole(const std::string& path, std::string& out) {
  const int fd = open_to_read(path);
  if (fd < 0) {
    if (errno == ENOENT) return false;
    throw StoreError(path + ": cannot open: " + std::strerror(errno));
  }
  struct stat st {};
  out.clear();
  if (::fstat(fd, &st) == 0) out.resize(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::pread(fd, out.data() + got, out.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      throw StoreError(path + ": cannot read: " + std::strerror(e));
    }
    if (n == 0) break;  // shorter than fstat said: read what is there
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);
  ::close(fd);
  return true;
}

// Renames `from` to `to` unless `to` exists (RENAME_NOREPLACE); false if it was not renamed.
bool rename_new(const std::string& from, const std::string& to) {
  return ::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0;
}

void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

TickLog::~TickLog() {
  close_fd();
}

std::string TickLog::file_of(std::int64_t hour) const {
  return dir_ + "/" + std::to_string(hour / 1000) + std::string(kSuffix);
}

std::string TickLog::spare_of(std::int64_t hour) const {
  return dir_ + "/" + std::to_string(hour / 1000) + std::string(kSpareSuffix);
}

TickLog::Listing TickLog::list() const {
  Listing out;
  std::error_code ec;
  fs::directory_iterator it(dir_, ec), end;
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory) return out;
    throw StoreError(dir_ + ": cannot list: " + ec.message());
  }
  for (; it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    for (auto [suffix, to] :
         {std::pair{kSuffix, &out.hours}, std::pair{kSpareSuffix, &out.spares}}) {
      if (name.size() <= suffix.size() || !name.ends_with(suffix)) continue;
      std::int64_t s = 0;
      const char* last = name.data() + name.size() - suffix.size();
      auto [p, err] = std::from_chars(name.data(), last, s);
      if (err != std::errc() || p != last || s % 3600 != 0) continue;
      if (s > INT64_MAX / 1000 || s < INT64_MIN / 1000) continue;
      to->push_back(s * 1000);
    }
  }
  if (ec) throw StoreError(dir_ + ": cannot list: " + ec.message());
  std::sort(out.hours.begin(), out.hours.end());
  std::sort(out.spares.begin(), out.spares.end());
  return out;
}

std::vector<std::int64_t> TickLog::hours() const {
  return list().hours;
}

void TickLog::close_fd() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  fd_hour_ = INT64_MIN;
}

void TickLog::open_for_append(std::int64_t hour) {
  if (fd_ >= 0 && fd_hour_ == hour) return;
  close_fd();
  if (!dir_made_) {
    try {
      make_directories(dir_);
    } catch (const std::system_error& e) {
      throw StoreError(e.what());
    }
    dir_made_ = true;
  }
  const std::string path = file_of(hour);
  for (int attempt = 0;; ++attempt) {
    std::error_code ec;
    const fs::file_status status = fs::symlink_status(path, ec);
    if (ec && status.type() != fs::file_type::not_found)  // not to take a spare over it
      throw StoreError(path + ": " + ec.message());
    const bool existed = fs::exists(status);
    const bool recycled = !existed && recycle_into(path, hour);
    int fd;
    try {
      fd = open_or_create_file(path);
    } catch (const std::system_error& e) {
      throw StoreError(e.what());
    }
    if (!existed) {
      sync_directory(dir_);  // the new name survives a power cut with the records in it
      // A recycled file's blocks are written already: appends overwrite them from its start.
      struct stat st {};
      fd_ = fd, fd_hour_ = hour, fd_size_ = 0;
      fd_allocated_ = recycled && ::fstat(fd, &st) == 0 ? static_cast<std::size_t>(st.st_size) : 0;
      return;
    }
    std::string file;
    read_whole(path, file);
    std::vector<Record> records;
    std::size_t end, stop;
    // A torn last record (frame()) is overwritten by the next append.
    const Tail tail = frame(file, hour, records, end, stop);
    if (tail == Tail::garbage && attempt == 0) {
      ::close(fd);
      std::string stamp;
      const std::string aside = move_aside(path, path + ": damaged", stamp);
      std::lock_guard lock(note_mutex_);
      if (!note_.empty()) note_ += "; ";
      note_ += path + ": damaged at byte " + std::to_string(stop) + " (not a record); moved to " +
               aside + " (its ticks are not served) and the hour's file started anew";
      continue;
    }
    fd_ = fd, fd_hour_ = hour, fd_size_ = tail == Tail::garbage ? file.size() : end;
    fd_allocated_ = file.size();
    return;
  }
}

void TickLog::append(std::int64_t ts, std::int64_t last, std::uint32_t ticks,
                     std::string_view carry, std::string_view block) {
  open_for_append(floor_to(ts, Store::kHourMs));
  std::string payload;
  if (!carry.empty()) {
    payload.reserve(11 + carry.size() + block.size());
    payload.push_back(kCarried);
    sample_codec::put_varint(payload, carry.size());
    payload += carry;
    payload += block;
  }
  const std::string_view body = carry.empty() ? block : std::string_view(payload);
  std::string rec;
  rec.reserve(kHeaderBytes + body.size());
  put_u32(rec, kMagic);
  put_u32(rec, static_cast<std::uint32_t>(body.size()));
  put_i64(rec, ts);
  put_i64(rec, last);
  put_u32(rec, ticks);
  put_u32(rec, crc32_of(body, crc32_of(rec)));
  rec += body;
  const std::string path = file_of(fd_hour_);
  auto fail = [&](const char* what) {
    const int e = errno;
    if (::ftruncate(fd_, static_cast<off_t>(fd_size_)) != 0)
      close_fd();  // checked again
    else
      fd_allocated_ = std::min(fd_allocated_, fd_size_);  // the blocks past it went too
    throw StoreError(path + ": " + what + ": " + std::strerror(e) +
                     (e == ENOSPC || e == EDQUOT ? " (the disk is full)" : ""));
  };
  // At a page boundary: the page the last record ended in is not written again (the bytes up to
  // here read as zeros, and are not the filesystem's to store where it keeps holes).
  const std::size_t at = align_up(fd_size_);
  // Blocks of the filesystem taken ahead, kPreallocate at a time (fallocate, the size kept):
  // an append that allocates its own blocks also rewrites the allocation bitmap, the group's
  // descriptor and the inode's extents. Where the filesystem cannot, appends allocate as usual.
  if (at + rec.size() > fd_allocated_) {
    const std::size_t from = std::max<std::size_t>(fd_allocated_, at);
    if (::fallocate(fd_, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(from),
                    static_cast<off_t>(at + rec.size() - from + kPreallocate)) == 0)
      fd_allocated_ = at + rec.size() + kPreallocate;
  }
  for (std::size_t done = 0; done < rec.size();) {
    const ssize_t n =
        ::pwrite(fd_, rec.data() + done, rec.size() - done, static_cast<off_t>(at + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("cannot write ticks");
    done += static_cast<std::size_t>(n);
  }
  if (::fdatasync(fd_) != 0) fail("cannot sync ticks");
  fd_size_ = at + rec.size();
}

int TickLog::prune(std::int64_t cut) {
  floor_.store(cut, std::memory_order_relaxed);
  int deleted = 0;
  const Listing now = list();
  std::size_t spares = now.spares.size();
  // A file holds blocks that start in its hour and end within kMaxBlockSpanMs of their start.
  for (std::int64_t hour : now.hours) {
    if (hour > minus_saturating(cut, Store::kHourMs + kMaxBlockSpanMs)) break;
    if (hour == fd_hour_) close_fd();
    // Kept as a spare while there are fewer than kSpares, for an hour to come (recycle_into()).
    if (spares < kSpares && rename_new(file_of(hour), spare_of(hour))) {
      ++spares, ++deleted;
      continue;
    }
    std::error_code ec;
    if (fs::remove(file_of(hour), ec)) ++deleted;
    if (ec) throw StoreError(file_of(hour) + ": cannot delete: " + ec.message());
  }
  return deleted;
}

bool TickLog::recycle_into(const std::string& path, std::int64_t hour) {
  // The oldest first, and only one of an earlier hour: a file's hours then only rise, so all it
  // held before is of hours before this one, never read as this hour's (after the clock went
  // back, the hour gets a new file).
  std::vector<std::int64_t> spares;
  try {
    spares = list().spares;
  } catch (const StoreError&) {
    return false;  // a new file then
  }
  for (std::int64_t was : spares)
    if (was < hour && rename_new(spare_of(was), path)) return true;
  return false;
}

void TickLog::clear() {
  close_fd();
  const Listing now = list();
  auto remove = [](const std::string& path) {
    std::error_code ec;
    fs::remove(path, ec);
    if (ec) throw StoreError(path + ": cannot delete: " + ec.message());
  };
  for (std::int64_t hour : now.hours) remove(file_of(hour));
  for (std::int64_t was : now.spares) remove(spare_of(was));
}

std::string TickLog::take_note() {
  std::lock_guard lock(note_mutex_);
  return std::exchange(note_, {});
}

void TickLog::blocks(std::int64_t from, std::int64_t to, bool newest_first,
                     const std::function<bool(const Block&)>& fn) const {
  if (from > to) return;
  std::vector<std::int64_t> hs = hours();
  const std::int64_t floor = floor_.load(std::memory_order_relaxed);
  const std::int64_t first_hour = minus_saturating(from, Store::kHourMs + kMaxBlockSpanMs);
  hs.erase(std::remove_if(hs.begin(), hs.end(),
                          [&](std::int64_t h) { return h <= first_hour || h > to; }),
           hs.end());
  if (newest_first) std::reverse(hs.begin(), hs.end());
  std::string file;
  std::vector<Record> records;
  for (std::int64_t hour : hs) {
    if (!read_whole(file_of(hour), file)) continue;
    std::size_t end, stop;
    frame(file, hour, records, end, stop);
    // In ts order; of the same ts the later-written (stable sort, then the last of each run).
    std::stable_sort(records.begin(), records.end(),
                     [](const Record& a, const Record& b) { return a.ts < b.ts; });
    std::vector<const Record*> take;
    for (std::size_t i = 0; i < records.size(); ++i) {
      const Record& r = records[i];
      if (i + 1 < records.size() && records[i + 1].ts == r.ts) continue;
      if (r.ts <= to && r.last >= from && r.last >= floor) take.push_back(&r);
    }
    if (newest_first) std::reverse(take.begin(), take.end());
    for (const Record* r : take) {
      std::string_view carry, block;
      if (!r->intact(file) || !split_payload(r->block(file), carry, block))
        continue;  // reads as missing
      if (!fn(Block{r->ts, r->last, r->ticks, block})) return;
    }
  }
}

std::int64_t TickLog::oldest() const {
  // Headers only (a query asks this to know where the raw tier starts): a file's blocks all
  // start in its hour, so the first file with a block not pruned holds the oldest.
  const std::int64_t floor = floor_.load(std::memory_order_relaxed);
  for (std::int64_t hour : hours()) {
    const int fd = open_to_read(file_of(hour));
    if (fd < 0) continue;  // pruned meanwhile
    std::int64_t oldest = INT64_MAX;
    each_header(fd, hour, 0, [&](std::size_t, std::string_view v) {
      const auto ts = static_cast<std::int64_t>(get(v, 8, 8));
      if (static_cast<std::int64_t>(get(v, 16, 8)) >= floor) oldest = std::min(oldest, ts);
      return true;
    });
    ::close(fd);
    if (oldest != INT64_MAX) return oldest;
  }
  return INT64_MAX;
}

std::string TickLog::carried() const {
  struct Candidate {
    std::uint64_t rank;
    std::int64_t hour;
    std::size_t at, size;
  };
  std::vector<Candidate> found;
  for (std::int64_t hour : hours()) {
    const int fd = open_to_read(file_of(hour));
    if (fd < 0) continue;  // pruned meanwhile
    struct stat st {};
    const std::size_t file_size = ::fstat(fd, &st) == 0 ? static_cast<std::size_t>(st.st_size) : 0;
    // Each header and the start of its payload: kCarried, varint(n), the carry's first varint.
    each_header(fd, hour, 21, [&](std::size_t at, std::string_view v) {
      const auto size = static_cast<std::size_t>(get(v, 4, 4));
      if (file_size < at + kHeaderBytes || size > file_size - at - kHeaderBytes)
        return false;  // cut short (or a damaged size: nothing that large is read)
      std::string_view p = v.substr(kHeaderBytes, size);
      std::uint64_t len = 0, rank = 0;
      if (!p.empty() && p.front() == kCarried) {
        p.remove_prefix(1);
        if (sample_codec::get_varint(p, len) && sample_codec::get_varint(p, rank))
          found.push_back({rank, hour, at, size});
      }
      return true;
    });
    ::close(fd);
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const Candidate& a, const Candidate& b) { return a.rank > b.rank; });
  std::string rec;
  for (const Candidate& c : found) {
    const int fd = open_to_read(file_of(c.hour));
    if (fd < 0) continue;
    rec.resize(kHeaderBytes + c.size);
    const ssize_t n = ::pread(fd, rec.data(), rec.size(), static_cast<off_t>(c.at));
    ::close(fd);
    if (n != static_cast<ssize_t>(rec.size())) continue;  // shorter now (pruned, recycled)
    const Record r = record_at(rec, 0);
    std::string_view carry, block;
    if (r.intact(rec) && split_payload(r.block(rec), carry, block)) return std::string(carry);
  }
  return {};
}

}  // namespace kiwi::agent
