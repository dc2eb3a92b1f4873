// The files the agent creates itself (files.hpp): modes whatever the umask, no link followed, no
// directory another user can write (issue 16, "a safe snapshot file").
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "base/files.hpp"
#include "collect/snapshot.hpp"
#include "store/store.hpp"
#include "test_support.hpp"

using namespace kiwi::agent;
namespace fs = std::filesystem;
using kiwi_test::TempDir;

namespace {

// The process umask for one scope.
struct Umask {
  mode_t old;
  explicit Umask(mode_t m) : old(::umask(m)) {}
  ~Umask() { ::umask(old); }
};

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

std::string text_of(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

}  // namespace

TEST_CASE("files: directories are 0755 and files 0644 whatever the umask") {
  for (mode_t mask : {mode_t{0}, mode_t{077}}) {
    INFO("umask " << std::oct << mask);
    TempDir tmp;
    Umask scope(mask);
    const fs::path deep = tmp.path / "a" / "b" / "c";
    make_directories(deep);
    for (auto& d : {tmp.path / "a", tmp.path / "a" / "b", deep}) CHECK(mode_of(d) == 0755);
    CHECK(mode_of(tmp.path) == 0700);  // an existing directory is left as it is

    write_file_atomically((deep / "current.json").string(), "{}");
    CHECK(mode_of(deep / "current.json") == 0644);
    CHECK(text_of(deep / "current.json") == "{}");
    ::close(open_or_create_file((deep / "x.lock").string()));
    CHECK(mode_of(deep / "x.lock") == 0644);

    // The database and the files SQLite makes beside it (with the database's mode).
    {
      Store store((deep / "kiwi.db").string());
      CHECK(mode_of(deep / "kiwi.db") == 0644);
      for (auto* extra : {"kiwi.db-wal", "kiwi.db-shm"})
        if (fs::exists(deep / extra)) CHECK(mode_of(deep / extra) == 0644);
    }
  }
}

TEST_CASE(
    "files: a symbolic link planted at the snapshot's temporary or lock name is not followed") {
  TempDir tmp;
  const fs::path victim = tmp.path / "victim";
  write(victim, "precious\n");
  const std::string path = (tmp.path / "current.json").string();

  SECTION("the old fixed temporary name <path>.tmp") {
    fs::create_symlink(victim, path + ".tmp");
    for (int i = 0; i < 3; ++i)
      write_file_atomically(path, "{\"sequence\":" + std::to_string(i) + "}");
    CHECK(text_of(victim) == "precious\n");
    CHECK(text_of(path) == "{\"sequence\":2}");
    CHECK(fs::is_symlink(path + ".tmp"));
    // No temporary file is left behind.
    int entries = 0;
    for ([[maybe_unused]] auto& e : fs::directory_iterator(tmp.path)) ++entries;
    CHECK(entries == 3);  // victim, current.json, the planted link
  }
  SECTION("the lock file") {
    fs::create_symlink(victim, path + ".lock");
    CHECK_THROWS_WITH(
        SnapshotFile(path),
        Catch::Contains("cannot open " + path + ".lock is a symbolic link (not followed)"));
    CHECK(text_of(victim) == "precious\n");
  }
  SECTION("a symbolic link at the file's own name is replaced, not written through") {
    fs::create_symlink(victim, path);
    write_file_atomically(path, "{}");
    CHECK(text_of(victim) == "precious\n");
    CHECK_FALSE(fs::is_symlink(path));
    CHECK(text_of(path) == "{}");
  }
}

TEST_CASE("files: a snapshot directory another user can write is refused, with the reason") {
  TempDir tmp;
  const fs::path dir = tmp.path / "run";
  fs::create_directory(dir);
  const std::string path = (dir / "current.json").string();
  auto refused = [&](const std::string& why) {
    CHECK_THROWS_MATCHES(
        SnapshotFile(path), UnsafeDirectory,
        Catch::Message("snapshot file " + path + ": directory " + dir.string() + " " + why +
                       ": another user could replace the files the agent writes "
                       "there; make it writable by the agent's user alone (chmod "
                       "go-w " +
                       dir.string() + ") or choose a directory that is"));
    CHECK_FALSE(fs::exists(path + ".lock"));  // nothing created in it
  };
  SECTION("writable by every user") {
    fs::permissions(dir, fs::perms::all);
    refused("is writable by every user (mode 0777)");
  }
  SECTION("writable by every user, sticky (as /tmp)") {
    ::chmod(dir.c_str(), 01777);
    refused("is writable by every user (mode 1777)");
  }
  SECTION("writable by another group") {
    if (::getegid() == 54321 || ::chown(dir.c_str(), static_cast<uid_t>(-1), 54321) != 0)
      kiwi_test::skip_test("cannot give a directory to another group here (needs root)");
    ::chmod(dir.c_str(), 0775);
    refused("is writable by group 54321 (mode 0775), not only by the agent's user");
  }
  SECTION("owned by another user") {
    if (::geteuid() != 0 || ::chown(dir.c_str(), 54321, static_cast<gid_t>(-1)) != 0)
      kiwi_test::skip_test("cannot give a directory to another user here (needs root)");
    refused("is owned by uid 54321, not the agent's user (uid 0) or root");
  }
  SECTION("a parent writable by every user, without the sticky bit") {
    fs::permissions(tmp.path, fs::perms::all);
    CHECK_THROWS_WITH(SnapshotFile(path),
                      Catch::Contains("directory " + tmp.path.string() +
                                      " is writable by every user (mode 0777)"));
  }
  SECTION("a private directory under a sticky one (/tmp) is fine") {
    SnapshotFile file(path);
    file.write("{}");
    CHECK(text_of(path) == "{}");
  }
}

TEST_CASE("files: the temporary files a killed agent left are removed when the next one starts") {
  TempDir tmp;
  const std::string path = (tmp.path / "current.json").string();
  write(path + ".tmp.Ab3dE9", "half");
  write(path + ".tmp.other-name", "not ours");
  write(tmp.path / "unrelated.tmp.Ab3dE9", "not ours");
  {
    SnapshotFile file(path);
    CHECK_FALSE(fs::exists(path + ".tmp.Ab3dE9"));
    CHECK(fs::exists(path + ".tmp.other-name"));
    CHECK(fs::exists(tmp.path / "unrelated.tmp.Ab3dE9"));
  }
}
