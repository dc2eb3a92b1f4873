// Helpers shared by the unit and integration tests: a logger that keeps its lines, a scratch
// directory, a free loopback port, facts read straight from a SQLite file, and a really full
// filesystem (a tiny tmpfs).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sqlite3.h>
#include <sys/socket.h>

#include <unistd.h>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <kiwi/plugin.hpp>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace kiwi_test {

// A logger that keeps every line it is given (from any thread), for a test of what was logged.
struct LogLines final : kiwi::Logger {
  void log(kiwi::LogLevel, std::string_view m) override {
    std::lock_guard lock(mutex);
    lines.emplace_back(m);
  }
  // How many lines hold `part`.
  std::size_t count(std::string_view part) const {
    std::lock_guard lock(mutex);
    std::size_t n = 0;
    for (auto& l : lines) n += l.find(part) != std::string::npos;
    return n;
  }
  mutable std::mutex mutex;
  std::vector<std::string> lines;
};

// Whether process `pid` has ended, waiting up to `wait` for it: /proc has no entry for it, or it is
// a zombie (dead, waiting for whoever inherited it to reap it; in a container that may be nobody).
// For the tests that check a killed program took its whole process group with it.
inline bool process_gone(long pid,
                         std::chrono::milliseconds wait = std::chrono::milliseconds(2000)) {
  const auto until = std::chrono::steady_clock::now() + wait;
  for (;;) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    if (!stat) return true;
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');
    if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z')
      return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// A fresh directory under /tmp, removed with the object.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char tmpl[] = "/tmp/kiwi-test-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// A loopback port that was free a moment ago (the kernel's choice for a socket bound to port 0).
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("no free port");
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

// A scratch SQLite file: `path()` is kiwi.db in a fresh directory `dir`, removed with the object.
struct TempDb {
  TempDir tmp;
  const std::filesystem::path& dir = tmp.path;
  std::string path() const { return (dir / "kiwi.db").string(); }
};

// For a test that cannot run on this machine (no tmpfs without root): it never passes. Under ctest
// (tests/CMakeLists.txt sets KIWI_CTEST=1 and SKIP_RETURN_CODE 77 on every test case, each in its
// own process) the process ends with 77 and ctest lists the test as "Skipped" with this line in
// its output; run by hand, the test fails with the reason. _Exit runs no destructor: an agent or
// other program the test started through tests/integration/process.hpp is killed by the kernel
// as the process ends (PR_SET_PDEATHSIG), not by its owner.
[[noreturn]] inline void skip_test(const std::string& why) {
  if (std::getenv("KIWI_CTEST")) {
    std::printf("SKIPPED: %s\n", why.c_str());
    std::fflush(stdout);
    std::_Exit(77);
  }
  FAIL("cannot run here: " << why);
  std::abort();  // FAIL throws; not reached
}

// One value of a query run on a read-only connection ("" if it returns no row or NULL). Throws if
// the file cannot be read at all, e.g. while a running agent holds it (it keeps its history file
// to itself): use rows_on_disk() for a running agent's file.
inline std::string sqlite_value(const std::filesystem::path& db, const char* sql) {
  sqlite3* h = nullptr;
  sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  std::string out;
  int rc = sqlite3_prepare_v2(h, sql, -1, &st, nullptr);
  if (rc == SQLITE_OK) rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    if (auto* text = sqlite3_column_text(st, 0)) out = reinterpret_cast<const char*>(text);
  } else if (rc != SQLITE_DONE) {
    std::string error = db.string() + ": " + sqlite3_errmsg(h);
    sqlite3_finalize(st);
    sqlite3_close(h);
    throw std::runtime_error(error);
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  return out;
}

inline std::string quick_check(const std::filesystem::path& db) {
  return sqlite_value(db, "PRAGMA quick_check");
}

// Ticks in the tick log beside `db` (`<db>-ticks/*.ticks`, agent/src/store/tick_log.hpp), read
// as that header documents the records (not through the store's code): every record that frames
// (magic, size within the file, its first tick in the file's hour; each at a multiple of 4 KiB)
// counts its header's ticks.
inline std::size_t ticks_in_log(const std::filesystem::path& db) {
  namespace fs = std::filesystem;
  std::size_t ticks = 0;
  std::error_code ec;
  for (fs::directory_iterator it(db.string() + "-ticks", ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->path().extension() != ".ticks") continue;
    const std::int64_t hour = std::stoll(it->path().stem().string()) * 1000;
    std::ifstream in(it->path(), std::ios::binary);
    const std::string f((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto u32 = [&](std::size_t at) {
      std::uint32_t v = 0;
      for (int i = 0; i < 4; ++i)
        v |= std::uint32_t(static_cast<unsigned char>(f[at + i])) << (8 * i);
      return v;
    };
    // Each record at a multiple of 4 KiB.
    for (std::size_t at = 0; at < f.size() && f.size() - at >= 32 && u32(at) == 0x316b546b;) {
      const std::size_t size = u32(at + 4);
      const auto ts = static_cast<std::int64_t>(u32(at + 8) | std::uint64_t(u32(at + 12)) << 32);
      if (size > f.size() - at - 32 || ts < hour || ts >= hour + 3'600'000) break;
      ticks += u32(at + 24);
      at = (at + 32 + size + 4095) / 4096 * 4096;
    }
  }
  return ticks;
}

// Ticks committed to `db` (in the tick log beside it, and in blocks and tick rows of an older
// agent's file), as a new reader would find them after a crash: the file counted in a copy of it
// and its WAL, so it also works while an agent runs and holds the file.
inline std::size_t rows_on_disk(const std::filesystem::path& db) {
  namespace fs = std::filesystem;
  std::string dir = (fs::temp_directory_path() / "kiwi-rows-XXXXXX").string();
  if (!::mkdtemp(dir.data())) throw std::runtime_error("mkdtemp failed");
  const fs::path copy = fs::path(dir) / "copy.db";
  fs::copy_file(db, copy);
  if (fs::exists(db.string() + "-wal")) fs::copy_file(db.string() + "-wal", copy.string() + "-wal");
  std::size_t rows = 0;
  try {
    rows = std::stoul(sqlite_value(copy,
                                   "SELECT (SELECT count(*) FROM samples) + "
                                   "(SELECT coalesce(sum(ticks), 0) FROM blocks)"));
  } catch (...) {
    fs::remove_all(dir);
    throw;
  }
  fs::remove_all(dir);
  return rows + ticks_in_log(db);
}

// A tmpfs of `size` (e.g. "64k") mounted at `dir` for the object's life, to fill up for real.
// mounted() is false where mounting is not allowed (not root); callers then skip_test().
class TinyFilesystem {
 public:
  TinyFilesystem(std::filesystem::path dir, const std::string& size) : dir_(std::move(dir)) {
    std::filesystem::create_directories(dir_);
    mounted_ = std::system(("mount -t tmpfs -o mode=0755,size=" + size + " tmpfs " + dir_.string() +
                            " 2>/dev/null")
                               .c_str()) == 0;
  }
  ~TinyFilesystem() {
    if (mounted_) (void)std::system(("umount -l " + dir_.string()).c_str());
  }
  TinyFilesystem(const TinyFilesystem&) = delete;
  TinyFilesystem& operator=(const TinyFilesystem&) = delete;
  bool mounted() const { return mounted_; }
  bool grow(const std::string& size) {
    return std::system(("mount -o remount,size=" + size + " " + dir_.string()).c_str()) == 0;
  }
  const std::filesystem::path& path() const { return dir_; }

 private:
  std::filesystem::path dir_;
  bool mounted_ = false;
};

}  // namespace kiwi_test
