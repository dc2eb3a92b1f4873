// Helpers shared by the unit and integration tests: facts read straight from a SQLite file, and a
// really full filesystem (a tiny tmpfs).
#pragma once

#include <sqlite3.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace kiwi_test {

// One value of a query run on a read-only connection ("" if it fails).
inline std::string sqlite_value(const std::filesystem::path& db, const char* sql) {
  sqlite3* h = nullptr;
  sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  std::string out;
  if (sqlite3_prepare_v2(h, sql, -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    if (auto* text = sqlite3_column_text(st, 0)) out = reinterpret_cast<const char*>(text);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return out;
}

inline std::string quick_check(const std::filesystem::path& db) {
  return sqlite_value(db, "PRAGMA quick_check");
}

inline std::size_t rows_on_disk(const std::filesystem::path& db) {
  return std::stoul("0" + sqlite_value(db, "SELECT COUNT(*) FROM samples"));
}

// A tmpfs of `size` (e.g. "64k") mounted at `dir` for the object's life, to fill up for real.
// mounted() is false where mounting is not allowed (not root); callers then skip with a WARN.
class TinyFilesystem {
 public:
  TinyFilesystem(std::filesystem::path dir, const std::string& size) : dir_(std::move(dir)) {
    std::filesystem::create_directories(dir_);
    mounted_ = std::system(("mount -t tmpfs -o size=" + size + " tmpfs " + dir_.string() +
                            " 2>/dev/null").c_str()) == 0;
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
