// kiwi-agent plugin SDK: small file helpers for sensors that read procfs/sysfs text files.
// All paths are built from the configured roots (SensorContext::procfs / sysfs), never "/proc".
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "kiwi/text.hpp"
#include "kiwi/utf8.hpp"

namespace kiwi {

// root + "/" + relative, without doubling the slash.
inline std::string join_path(std::string_view root, std::string_view relative) {
  std::string out(root);
  while (!out.empty() && out.back() == '/') out.pop_back();
  while (!relative.empty() && relative.front() == '/') relative.remove_prefix(1);
  out.push_back('/');
  out.append(relative);
  return out;
}

// The most a read takes from one file, by kind. procfs files report size 0, so the cap is on the
// bytes read; a file over it is an error naming the path and the cap, never a silent truncation.
// The default is for single values and short tables (loadavg, meminfo, a sysfs attribute: one
// page at most); the larger ones for tables with a line per CPU, device, interface or mount,
// which on big hosts run to megabytes (/proc/stat with 8k CPUs, mountinfo of a node running
// hundreds of containers, whose overlay lines are kilobytes each).
inline constexpr std::size_t kReadCap = 256 * 1024;
inline constexpr std::size_t kTableReadCap = 4 * 1024 * 1024;        // stat, diskstats, net/dev
inline constexpr std::size_t kMountTableReadCap = 16 * 1024 * 1024;  // self/mountinfo

// "256 KiB", "4 MiB", "1000 bytes": a size for a message.
inline std::string format_size(std::size_t bytes) {
  if (bytes >= 1024 * 1024 && bytes % (1024 * 1024) == 0)
    return std::to_string(bytes / (1024 * 1024)) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes / 1024) + " KiB";
  return std::to_string(bytes) + " bytes";
}

// A read the SDK refused or that failed: a std::system_error (code() is the errno: EFBIG over the
// cap, EINVAL for a file that is not a regular file, or the system's), whose what() is the
// message alone ("<path>: larger than the read cap of 256 KiB").
class ReadError : public std::system_error {
 public:
  ReadError(int err, std::string message)
      : std::system_error(err, std::generic_category()), message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

namespace detail {
// What a read gave: 0, or the errno that ended it; `what` is the message of a refusal of ours
// (empty for the system's errors, which are reported as std::system_error naming the path).
struct ReadStatus {
  int err = 0;
  std::string what;
};

inline const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

inline ReadStatus not_regular(const std::string& path, mode_t mode) {
  return {EINVAL, path + ": " + file_type_name(mode) + ", not a regular file: not read"};
}

// Opens `path` to read: only a regular file (procfs and sysfs files are), so that a FIFO cannot
// block the caller and a character device (/dev/zero) cannot feed it without end. It is checked
// before the open (opening some devices has effects) and on the open file (in case the name was
// replaced in between); O_NONBLOCK so that an open cannot wait either way.
inline ReadStatus open_regular(const std::string& path, int& fd) {
  fd = -1;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {errno, {}};
  if (!S_ISREG(st.st_mode)) return not_regular(path, st.st_mode);
  fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return {errno, {}};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    ::close(fd);
    fd = -1;
    return S_ISREG(st.st_mode) ? ReadStatus{err, {}} : not_regular(path, st.st_mode);
  }
  return {};
}

// Reads the open file `fd` into `out`, at most `cap` bytes: one more is an error. From its start
// (pread: a procfs file kept open renders afresh) when `from_start`, else from where it is (a
// fresh descriptor; read() also serves the few procfs files that cannot seek).
inline ReadStatus read_capped(int fd, const std::string& path, std::string& out, std::size_t cap,
                              bool from_start) {
  out.clear();
  char buf[16384];
  for (;;) {
    const std::size_t want = std::min(sizeof buf, cap + 1 - out.size());
    ssize_t n =
        from_start ? ::pread(fd, buf, want, static_cast<off_t>(out.size())) : ::read(fd, buf, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return {errno, {}};
    if (n == 0) return {};
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > cap) {
      out.clear();
      out.shrink_to_fit();
      return {EFBIG, path + ": larger than the read cap of " + format_size(cap) + ": not read"};
    }
  }
}

// Reads a whole regular file into `out`, at most `cap` bytes.
inline ReadStatus read_all(const std::string& path, std::string& out, std::size_t cap) {
  int fd = -1;
  if (ReadStatus s = open_regular(path, fd); s.err) return s;
  ReadStatus s = read_capped(fd, path, out, cap, false);
  ::close(fd);
  return s;
}

[[noreturn]] inline void throw_read_error(const std::string& path, ReadStatus s) {
  if (!s.what.empty()) throw ReadError(s.err, std::move(s.what));
  throw std::system_error(s.err, std::generic_category(), path);
}
}  // namespace detail

// Reads a whole (small, virtual) file, at most `cap` bytes. Returns nullopt if it does not exist
// (ENOENT/ENOTDIR); throws std::system_error naming the path for any other failure (EACCES, EIO
// from a flaky sensor) and kiwi::ReadError (a std::system_error) for a file over `cap` or one that
// is not a regular file (a FIFO, a device, a directory), which is not opened.
// procfs/sysfs files report size 0, so this reads until EOF instead of trusting stat().
inline std::optional<std::string> read_file(const std::string& path, std::size_t cap = kReadCap) {
  std::string out;
  if (auto s = detail::read_all(path, out, cap); s.err) {
    if (s.what.empty() && (s.err == ENOENT || s.err == ENOTDIR)) return std::nullopt;
    detail::throw_read_error(path, std::move(s));
  }
  return out;
}

// The same, with every failure as nullopt: for attributes whose read fails as a matter of course
// (a link's speed is EINVAL while it is down or on Wi-Fi), without an exception every sample.
inline std::optional<std::string> read_file_if_readable(const std::string& path,
                                                        std::size_t cap = kReadCap) {
  std::string out;
  if (detail::read_all(path, out, cap).err != 0) return std::nullopt;
  return out;
}

// A file the sensor cannot work without: its text, or std::runtime_error "<path>: not found".
// Other failures throw as read_file does.
inline std::string read_required_file(const std::string& path, std::size_t cap = kReadCap) {
  auto text = read_file(path, cap);
  if (!text) throw std::runtime_error(path + ": not found");
  return std::move(*text);
}

// Opens `path` for read_open_file(), with read_file's rules (a regular file only, O_NONBLOCK):
// the descriptor (the caller closes it), or -1 if it does not exist (ENOENT/ENOTDIR); throws as
// read_file does otherwise. For a file kept open between samples (one to poll()).
inline int open_file(const std::string& path) {
  int fd = -1;
  if (auto s = detail::open_regular(path, fd); s.err) {
    if (s.what.empty() && (s.err == ENOENT || s.err == ENOTDIR)) return -1;
    detail::throw_read_error(path, std::move(s));
  }
  return fd;
}

// The whole text of a file opened by open_file(), read from its start, at most `cap` bytes;
// throws as read_file does.
inline std::string read_open_file(int fd, const std::string& path, std::size_t cap = kReadCap) {
  std::string out;
  if (auto s = detail::read_capped(fd, path, out, cap, true); s.err)
    detail::throw_read_error(path, std::move(s));
  return out;
}

// A file a sensor reads every sample, kept open between reads where that is safe: on procfs and
// sysfs a read from offset 0 renders the file afresh, and the open file stays the one its name
// meant (a sysfs file whose device went away answers ENODEV, and is then looked up again). That
// spares four of a read's five system calls (the path lookup of stat and open, fstat, close),
// which on a VM cost more than parsing the text. A file on any other filesystem, such as a
// fixture tree whose files a test may replace by rename, is opened for every read as
// read_file() does. Not thread-safe (a sensor's sample() is never concurrent with itself).
class KeptFile {
 public:
  explicit KeptFile(std::string path, std::size_t cap = kReadCap)
      : path_(std::move(path)), cap_(cap) {}
  ~KeptFile() { close(); }
  KeptFile(KeptFile&& o) noexcept : path_(std::move(o.path_)), cap_(o.cap_), fd_(o.fd_) {
    o.fd_ = -1;
  }
  KeptFile& operator=(KeptFile&& o) noexcept {
    if (this != &o) {
      close();
      path_ = std::move(o.path_);
      cap_ = o.cap_;
      fd_ = o.fd_;
      o.fd_ = -1;
    }
    return *this;
  }
  KeptFile(const KeptFile&) = delete;
  KeptFile& operator=(const KeptFile&) = delete;

  // The whole text into `out` (its storage reused), false if the file does not exist
  // (ENOENT/ENOTDIR); throws as read_file() does for any other failure.
  bool read_into(std::string& out) {
    if (detail::ReadStatus s = read_status(out); s.err) {
      if (s.what.empty() && (s.err == ENOENT || s.err == ENOTDIR)) return false;
      detail::throw_read_error(path_, std::move(s));
    }
    return true;
  }
  // As read_file(): the text, or nullopt if the file does not exist.
  std::optional<std::string> read() {
    std::string out;
    if (!read_into(out)) return std::nullopt;
    return out;
  }
  // As read_required_file(): the text, or std::runtime_error "<path>: not found".
  std::string read_required() {
    std::string out;
    if (!read_into(out)) throw std::runtime_error(path_ + ": not found");
    return out;
  }
  // As read_file_if_readable(): every failure is nullopt (the file stays open where it may).
  std::optional<std::string> read_if_readable() {
    std::string out;
    if (read_status(out).err != 0) return std::nullopt;
    return out;
  }

  const std::string& path() const { return path_; }
  int fd() const { return fd_; }  // the descriptor kept open, or -1 (none, or not kept)

  // Whether a file open as `fd` is on procfs or sysfs.
  static bool keepable(int fd) {
    struct statfs fs {};
    constexpr long kProcSuperMagic = 0x9fa0, kSysfsMagic = 0x62656572;
    return ::fstatfs(fd, &fs) == 0 && (fs.f_type == kProcSuperMagic || fs.f_type == kSysfsMagic);
  }

 private:
  detail::ReadStatus read_status(std::string& out) {
    if (fd_ >= 0) {
      detail::ReadStatus s = detail::read_capped(fd_, path_, out, cap_, true);
      if (s.err != ENODEV && s.err != ENOENT && s.err != ESTALE) return s;
      close();  // gone: the name is looked up again
    }
    int fd = -1;
    if (detail::ReadStatus s = detail::open_regular(path_, fd); s.err) return s;
    detail::ReadStatus s = detail::read_capped(fd, path_, out, cap_, false);
    if (keepable(fd))
      fd_ = fd;
    else
      ::close(fd);
    return s;
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  std::string path_;
  std::size_t cap_;
  int fd_ = -1;
};

// Calls parse(); a std::invalid_argument from it (a parser refusing the text) comes out as
// std::runtime_error "<path>: <what>", so the sample's error names the file it came from.
template <class Parse>
auto parse_file(const std::string& path, Parse&& parse) -> decltype(parse()) {
  try {
    return parse();
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

// Untrusted text (a line of a file, a field, a script's output) for a message: between `quote`
// characters, its first `max` bytes, with every byte that is not printable ASCII, the quote and
// '\' written as \xNN; a longer text is followed by "...(N bytes)". So a message never carries
// a newline, raw bytes or a whole 100 MB file:  'abc\x0adef'  'aaaa'...(104857600 bytes)
// Every message that quotes what it read uses this.
inline std::string quote_excerpt(std::string_view text, std::size_t max = 100, char quote = '\'') {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out(1, quote);
  for (std::size_t i = 0; i < text.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c >= 0x7f || c == static_cast<unsigned char>(quote) || c == '\\') {
      out += "\\x";
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back(quote);
  if (text.size() > max) out += "...(" + std::to_string(text.size()) + " bytes)";
  return out;
}

// `parts` with `sep` between them: a sample's notes ("skipped ...; ...").
inline std::string join(const std::vector<std::string>& parts, std::string_view sep = "; ") {
  std::string out;
  for (const auto& p : parts) out.append(out.empty() ? "" : sep).append(p);
  return out;
}

// Reads the whitespace-separated counters left in `rest` into `out` (extra counters are counted
// but not stored: newer kernels append columns) and returns how many there were. A field that is
// not a counter throws std::invalid_argument naming `line`.
inline std::size_t read_counters(std::string_view rest, std::span<std::uint64_t> out,
                                 std::string_view line) {
  std::size_t count = 0;
  for (std::string_view field = next_field(rest); !field.empty(); field = next_field(rest)) {
    auto value = to_number<std::uint64_t>(field);
    if (!value)
      throw std::invalid_argument("line " + quote_excerpt(line) + ": field " +
                                  quote_excerpt(field) + " is not a counter");
    if (count < out.size()) out[count] = *value;
    ++count;
  }
  return count;
}

}  // namespace kiwi
