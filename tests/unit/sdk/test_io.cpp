// The SDK's file reads (kiwi/io.hpp), which every sensor reads procfs and sysfs through, on files
// that are not what a sensor expects (issue 16, item 1): a FIFO must not block, a device must not
// be read without end, a huge file must not be read whole, and a message quoting what was read
// carries at most ~100 bytes of it, escaped.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <kiwi/io.hpp>
#include <kiwi/rates.hpp>
#include <string>
#include <thread>

#include "test_support.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;
using kiwi_test::TempDir;

namespace {

void write_file(const std::filesystem::path& p, std::string_view text) {
  std::ofstream(p, std::ios::binary) << text;
}

// The message and errno of what `read` throws (it must throw a std::system_error).
template <class Read>
std::pair<std::string, int> refusal(Read&& read) {
  try {
    read();
  } catch (const std::system_error& e) {
    return {e.what(), e.code().value()};
  }
  FAIL("no std::system_error thrown");
  return {};
}

long max_rss_kib() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

// No byte of `s` is a control byte or outside ASCII.
bool printable_ascii(std::string_view s) {
  for (unsigned char c : s)
    if (c < 0x20 || c >= 0x7f) return false;
  return true;
}

}  // namespace

TEST_CASE("io: a FIFO is refused at once, without waiting for a writer") {
  // Opened without O_NONBLOCK, a FIFO with no writer blocks the open for ever: the cpu sensor's
  // first sample hung before the agent listened, and SIGTERM did nothing.
  TempDir tmp;
  const std::string path = (tmp.path / "loadavg").string();
  REQUIRE(::mkfifo(path.c_str(), 0644) == 0);
  auto [what, err] = refusal([&] { kiwi::read_file(path); });
  CHECK(what == path + ": a FIFO, not a regular file: not read");
  CHECK(err == EINVAL);
  CHECK_THROWS_WITH(kiwi::read_required_file(path), what);
  CHECK_THROWS_WITH(kiwi::open_file(path), what);
  CHECK_FALSE(kiwi::read_file_if_readable(path));
}

TEST_CASE("io: a character device is refused, never read (/dev/zero as loadavg)") {
  // /dev/zero never ends: read to EOF it grew the agent's memory until std::bad_alloc.
  TempDir tmp;
  const auto link = tmp.path / "loadavg";
  std::filesystem::create_symlink("/dev/zero", link);
  const long before = max_rss_kib();
  for (const std::string& path : {std::string("/dev/zero"), link.string()}) {
    auto [what, err] = refusal([&] { kiwi::read_file(path); });
    CHECK(what == path + ": a character device, not a regular file: not read");
    CHECK(err == EINVAL);
    CHECK_FALSE(kiwi::read_file_if_readable(path));
  }
  CHECK(max_rss_kib() - before < 16 * 1024);
  // A directory is not a file to read either.
  CHECK_THROWS_WITH(kiwi::read_file(tmp.path.string()),
                    tmp.path.string() + ": a directory, not a regular file: not read");
}

TEST_CASE("io: a file over the read cap is an error naming the path and the cap") {
  TempDir tmp;
  const std::string path = (tmp.path / "stat").string();
  write_file(path, std::string(kiwi::kReadCap, 'x'));  // at the cap: read whole
  CHECK(kiwi::read_file(path)->size() == kiwi::kReadCap);
  write_file(path, std::string(kiwi::kReadCap + 1, 'x'));  // one byte over: not a truncation
  auto [what, err] = refusal([&] { kiwi::read_file(path); });
  CHECK(what == path + ": larger than the read cap of 256 KiB: not read");
  CHECK(err == EFBIG);
  CHECK_FALSE(kiwi::read_file_if_readable(path));
  // The cap is the caller's, per kind of file: a table may be bigger.
  CHECK(kiwi::read_file(path, kiwi::kTableReadCap)->size() == kiwi::kReadCap + 1);
  CHECK_THROWS_WITH(kiwi::read_file(path, 1000),
                    path + ": larger than the read cap of 1000 bytes: not read");
  CHECK(kiwi::format_size(kiwi::kMountTableReadCap) == "16 MiB");
}

TEST_CASE("io: a 100 MB file is not read whole: the read stops at the cap") {
  // A 100 MB thermal_zone0/temp was read whole every sample, and quoted whole in the error.
  TempDir tmp;
  const std::string path = (tmp.path / "temp").string();
  { std::ofstream(path, std::ios::binary) << "1"; }
  std::filesystem::resize_file(path, 100 * 1024 * 1024);  // sparse: no 100 MB on the disk
  const long before = max_rss_kib();
  auto [what, err] = refusal([&] { kiwi::read_file(path); });
  CHECK(what == path + ": larger than the read cap of 256 KiB: not read");
  CHECK(err == EFBIG);
  CHECK(max_rss_kib() - before < 16 * 1024);  // reading it whole took 100 MB more
}

TEST_CASE("io: missing files are nullopt, and a file kept open is read afresh from its start") {
  TempDir tmp;
  CHECK_FALSE(kiwi::read_file((tmp.path / "absent").string()));
  CHECK_FALSE(kiwi::read_file((tmp.path / "absent/below").string()));
  CHECK(kiwi::open_file((tmp.path / "absent").string()) == -1);
  CHECK_THROWS_WITH(kiwi::read_required_file((tmp.path / "absent").string()),
                    (tmp.path / "absent").string() + ": not found");

  const std::string path = (tmp.path / "mountinfo").string();
  write_file(path, "first");
  const int fd = kiwi::open_file(path);
  REQUIRE(fd >= 0);
  CHECK((::fcntl(fd, F_GETFL) & O_NONBLOCK) != 0);
  CHECK(kiwi::read_open_file(fd, path) == "first");
  CHECK(kiwi::read_open_file(fd, path) == "first");  // from the start again, not from the end
  CHECK_THROWS_WITH(kiwi::read_open_file(fd, path, 3),
                    path + ": larger than the read cap of 3 bytes: not read");
  ::close(fd);
}

TEST_CASE("io: quote_excerpt quotes at most 100 bytes, escaped, with the size of the rest") {
  CHECK(kiwi::quote_excerpt("sda 1 2") == "'sda 1 2'");
  CHECK(kiwi::quote_excerpt("a\nb\x01\xff'\\") == "'a\\x0ab\\x01\\xff\\x27\\x5c'");
  CHECK(kiwi::quote_excerpt("x\"y", 100, '"') == "\"x\\x22y\"");
  const std::string big(100 * 1024 * 1024, '7');
  CHECK(kiwi::quote_excerpt(big) == "'" + std::string(100, '7') + "'...(104857600 bytes)");
  CHECK(kiwi::quote_excerpt("abcdef", 3) == "'abc'...(6 bytes)");
}

TEST_CASE("io: binary garbage in a parsed file gives a short message without raw bytes") {
  // A diskstats/net/dev line of binary garbage: the parser's error quotes the line, and before
  // this quoted it whole, newlines and raw bytes into the log.
  std::string garbage = "sda 1 ";
  for (int i = 0; i < 200000; ++i) garbage.push_back(static_cast<char>((i * 37 + 11) % 256));
  garbage.erase(std::remove(garbage.begin() + 6, garbage.end(), ' '), garbage.end());
  std::uint64_t counters[4];
  std::string_view rest = std::string_view(garbage).substr(4);
  try {
    kiwi::read_counters(rest, counters, garbage);
    FAIL("garbage read as counters");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(printable_ascii(what));
    CHECK(what.size() < 2 * (100 * 4 + 40));  // two excerpts of 100 bytes, each byte \xNN at most
    CHECK_THAT(what,
               StartsWith("line 'sda 1 ") && Contains("...(") && EndsWith("is not a counter"));
  }
}

TEST_CASE("io: UTF-8 is cut between characters, never inside one") {
  const std::string euros = "\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac";  // three 3-byte characters
  CHECK(kiwi::truncate_utf8(euros, 9) == euros);
  CHECK(kiwi::truncate_utf8(euros, 5) == "\xe2\x82\xac...(9 bytes)");
  CHECK(kiwi::truncate_utf8(euros, 6) == "\xe2\x82\xac\xe2\x82\xac...(9 bytes)");
  CHECK(kiwi::truncate_utf8("abcdef", 2) == "ab...(6 bytes)");
}

TEST_CASE(
    "io: a KeptFile on a fixture tree is opened for every read, so a file replaced by "
    "rename is read new") {
  TempDir dir;
  const auto path = dir.path / "stat";
  write_file(path, "one\n");
  kiwi::KeptFile file(path.string());
  CHECK(file.read() == std::optional<std::string>("one\n"));
  CHECK(file.fd() == -1);  // not procfs or sysfs: nothing kept
  write_file(dir.path / "stat.new", "two\n");
  std::filesystem::rename(dir.path / "stat.new", path);
  CHECK(file.read() == std::optional<std::string>("two\n"));
  std::filesystem::remove(path);
  CHECK_FALSE(file.read());
  CHECK_THROWS_WITH(file.read_required(), EndsWith("stat: not found"));
  write_file(path, std::string(70, 'x'));
  kiwi::KeptFile small(path.string(), 64);
  CHECK_THROWS_WITH(small.read(), Contains("larger than the read cap of 64 bytes"));
  CHECK_FALSE(small.read_if_readable());
}

TEST_CASE("io: a KeptFile on procfs stays open and reads the file afresh each time") {
  // The real /proc: the one place the kept descriptor is used. /proc/uptime moves every 10 ms.
  kiwi::KeptFile uptime("/proc/uptime");
  const std::string first = uptime.read_required();
  const int fd = uptime.fd();
  CHECK(fd >= 0);
  CHECK(kiwi::KeptFile::keepable(fd));
  std::string now;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
    REQUIRE(uptime.read_into(now));
  } while (now == first && std::chrono::steady_clock::now() < until);
  CHECK(now != first);
  CHECK(uptime.fd() == fd);  // the same descriptor, read again from its start
  CHECK(kiwi::parse_uptime_ms(now) > kiwi::parse_uptime_ms(first));
  // Moved, the descriptor goes with it and is closed once.
  kiwi::KeptFile moved = std::move(uptime);
  CHECK(moved.fd() == fd);
  CHECK(uptime.fd() == -1);
}
