// kiwi-agent plugin SDK: small file helpers for sensors that read procfs/sysfs text files.
// All paths are built from the configured roots (SensorContext::procfs / sysfs), never "/proc".
#pragma once

#include <fcntl.h>
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

namespace detail {
// Reads a whole file into `out`; returns 0, or the errno of the open or read that failed.
inline int read_all(const std::string& path, std::string& out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : 0;
      ::close(fd);
      return err;
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
}
}  // namespace detail

// Reads a whole (small, virtual) file. Returns nullopt if it does not exist (ENOENT/ENOTDIR);
// throws std::system_error naming the path for any other failure (EACCES, EIO from a flaky sensor).
// procfs/sysfs files report size 0, so this reads until EOF instead of trusting stat().
inline std::optional<std::string> read_file(const std::string& path) {
  std::string out;
  if (int err = detail::read_all(path, out)) {
    if (err == ENOENT || err == ENOTDIR) return std::nullopt;
    throw std::system_error(err, std::generic_category(), path);
  }
  return out;
}

// The same, with every failure as nullopt: for attributes whose read fails as a matter of course
// (a link's speed is EINVAL while it is down or on Wi-Fi), without an exception every sample.
inline std::optional<std::string> read_file_if_readable(const std::string& path) {
  std::string out;
  if (detail::read_all(path, out) != 0) return std::nullopt;
  return out;
}

// A file the sensor cannot work without: its text, or std::runtime_error "<path>: not found".
// Other failures throw std::system_error naming the path, as read_file does.
inline std::string read_required_file(const std::string& path) {
  auto text = read_file(path);
  if (!text) throw std::runtime_error(path + ": not found");
  return std::move(*text);
}

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

// `parts` with `sep` between them: a sample's notes ("skipped ...; ...").
inline std::string join(const std::vector<std::string>& parts, std::string_view sep = "; ") {
  std::string out;
  for (const auto& p : parts) out.append(out.empty() ? "" : sep).append(p);
  return out;
}

// Trims ASCII whitespace at both ends.
inline std::string_view trim(std::string_view s) {
  while (!s.empty() &&
         (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// Splits off the next whitespace-separated field of `rest`; empty when the text is used up.
inline std::string_view next_field(std::string_view& rest) {
  std::size_t start = rest.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos) {
    rest = {};
    return {};
  }
  rest.remove_prefix(start);
  std::size_t end = std::min(rest.find_first_of(" \t\r\n"), rest.size());
  std::string_view field = rest.substr(0, end);
  rest.remove_prefix(end);
  return field;
}

// The whole of `s` as a number of type T, or nullopt (empty, trailing text, out of range).
template <typename T>
std::optional<T> to_number(std::string_view s) {
  T value{};
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return value;
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
      throw std::invalid_argument("line '" + std::string(line) + "': field '" + std::string(field) +
                                  "' is not a counter");
    if (count < out.size()) out[count] = *value;
    ++count;
  }
  return count;
}

}  // namespace kiwi
