// The store's SQLite wrapper (store/sqlite.hpp): statements finalize themselves, a run resets its
// statement, parameters bind as their own types, errors come back with SQLite's words, and a
// statement keeps the file it was prepared on.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "store/sqlite.hpp"
#include "test_support.hpp"

using namespace kiwi::agent;
namespace fs = std::filesystem;

namespace {
using kiwi_test::TempDb;

// File descriptors of this process open on `path` (/proc/self/fd): whether SQLite has let go.
int open_descriptors(const fs::path& path) {
  const fs::path want = fs::weakly_canonical(path);
  int n = 0;
  for (auto& e : fs::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const fs::path target = fs::read_symlink(e.path(), ec);
    if (!ec && target == want) ++n;
  }
  return n;
}

sql::Connection open_new(const std::string& path) {
  sql::Connection db;
  REQUIRE(db.open(path, sql::Access::read_write_create) == sql::kOk);
  return db;
}

std::int64_t count(sql::Connection& db, const char* table_sql) {
  sql::Statement st;
  REQUIRE(st.prepare(db, table_sql, false) == sql::kOk);
  auto rows = st.query();
  REQUIRE(rows.next());
  return rows.int64(0);
}
}  // namespace

TEST_CASE("sqlite wrapper: statements are finalized by their destructor, moved ones once") {
  TempDb tmp;
  sql::Connection db = open_new(tmp.path());
  db.exec("CREATE TABLE t(x INTEGER)");
  {
    sql::Statement a, b;
    REQUIRE(a.prepare(db, "SELECT x FROM t") == sql::kOk);
    REQUIRE(b.prepare(db, "INSERT INTO t VALUES(?1)") == sql::kOk);
    CHECK(db.statements() == 2);
    sql::Statement c = std::move(a);
    CHECK_FALSE(a);
    CHECK(c);
    CHECK(db.statements() == 2);
    b = std::move(c);  // b's INSERT is finalized, the SELECT moves in
    CHECK(db.statements() == 1);
    CHECK(b.execute() == sql::kDone);  // the SELECT, run to its end
    REQUIRE(c.prepare(db, "SELECT 1") == sql::kOk);
    REQUIRE(c.prepare(db, "SELECT 2") == sql::kOk);  // preparing again finalizes the first
    CHECK(db.statements() == 2);
  }
  CHECK(db.statements() == 0);
  CHECK(open_descriptors(tmp.path()) == 1);
  db.close();
  CHECK(open_descriptors(tmp.path()) == 0);
}

TEST_CASE("sqlite wrapper: a run resets its statement when it ends, so the next sees new commits") {
  TempDb tmp;
  sql::Connection writer = open_new(tmp.path());
  writer.exec("PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER)");
  sql::Statement insert;
  REQUIRE(insert.prepare(writer, "INSERT INTO t VALUES(?1)") == sql::kOk);
  // Runs back to back, with no reset written out: each run resets the statement at its end.
  for (std::int64_t i = 1; i <= 3; ++i) CHECK(insert.execute(i) == sql::kDone);
  CHECK_FALSE(insert.busy());

  sql::Connection reader;
  REQUIRE(reader.open(tmp.path(), sql::Access::read_only) == sql::kOk);
  sql::Statement select;
  REQUIRE(select.prepare(reader, "SELECT x FROM t ORDER BY x") == sql::kOk);
  {
    auto rows = select.query();
    REQUIRE(rows.next());
    CHECK(rows.int64(0) == 1);
    CHECK(select.busy());  // left after its first row, with rows still to come
  }
  CHECK_FALSE(select.busy());
  // A statement left running would keep its read transaction, and with it the snapshot of the
  // file before this commit.
  CHECK(insert.execute(std::int64_t{4}) == sql::kDone);
  std::vector<std::int64_t> seen;
  auto rows = select.query();
  while (rows.next()) seen.push_back(rows.int64(0));
  CHECK(seen == std::vector<std::int64_t>{1, 2, 3, 4});
  CHECK_FALSE(rows.next());  // at the end it stays there, not run again from the start
  CHECK(rows.code() == sql::kDone);
}

TEST_CASE("sqlite wrapper: parameters bind by index, each as its own type") {
  TempDb tmp;
  sql::Connection db = open_new(tmp.path());
  db.exec("CREATE TABLE t(a, b, c, d, e)");
  sql::Statement insert, select;
  REQUIRE(insert.prepare(db, "INSERT INTO t VALUES(?1, ?2, ?3, ?4, ?5)") == sql::kOk);
  REQUIRE(select.prepare(db,
                         "SELECT a, b, c, d, e, typeof(a), typeof(b), typeof(c), typeof(d), "
                         "typeof(e) FROM t") == sql::kOk);
  std::string text = "label \"x\"";
  const std::string bytes("\x01\x00\x02", 3);
  {
    auto run = insert.query();
    run.bind(1, INT64_MIN).bind(2, 42).bind(3, 2.5).bind(4, text).bind(5, sql::Blob{bytes});
    text = "changed before the step";  // text is copied at bind: the first value is stored
    CHECK_FALSE(run.next());
    CHECK(run.code() == sql::kDone);
  }
  auto rows = select.query();
  REQUIRE(rows.next());
  CHECK(rows.int64(0) == INT64_MIN);
  CHECK(rows.int32(1) == 42);
  CHECK(rows.real(2) == 2.5);
  CHECK(rows.text(3) == "label \"x\"");
  CHECK(rows.blob(4) == bytes);  // the NUL inside too
  CHECK(rows.text(5) == "integer");
  CHECK(rows.text(6) == "integer");
  CHECK(rows.text(7) == "real");
  CHECK(rows.text(8) == "text");
  CHECK(rows.text(9) == "blob");
  CHECK_FALSE(rows.null(0));
  CHECK_FALSE(rows.next());

  sql::Statement nulls;
  REQUIRE(nulls.prepare(db, "SELECT NULL, max(a) FROM t WHERE 0") == sql::kOk);
  auto none = nulls.query();
  REQUIRE(none.next());
  CHECK(none.null(0));
  CHECK(none.null(1));
  CHECK(none.text(0).empty());
  CHECK(none.blob(1).empty());
}

TEST_CASE("sqlite wrapper: errors come back as result codes and SQLite's words") {
  TempDb tmp;
  sql::Connection db = open_new(tmp.path());
  db.exec("CREATE TABLE u(x INTEGER PRIMARY KEY)");

  sql::Statement bad;
  CHECK(bad.prepare(db, "SELEC x FROM u") != sql::kOk);
  CHECK_FALSE(bad);
  CHECK_THAT(db.message(), Catch::Contains("syntax error"));
  CHECK(std::string(db.error("cannot prepare statement").what()) ==
        tmp.path() + ": cannot prepare statement: " + db.message());
  CHECK(bad.execute() != sql::kDone);  // an empty statement fails its run, and does not crash

  sql::Statement insert;
  REQUIRE(insert.prepare(db, "INSERT INTO u VALUES(?1)") == sql::kOk);
  CHECK(insert.execute(std::int64_t{1}) == sql::kDone);
  CHECK(insert.execute(std::int64_t{1}) != sql::kDone);
  CHECK_THAT(db.message(), Catch::Contains("UNIQUE constraint failed"));
  CHECK(insert.execute(std::int64_t{2}) == sql::kDone);  // usable again after the failure
  CHECK(count(db, "SELECT count(*) FROM u") == 2);

  {
    auto run = insert.query();
    run.bind(2, 7);  // no ?2: the run fails before it steps
    CHECK_FALSE(run.next());
    CHECK(run.failed());
  }
  CHECK(count(db, "SELECT count(*) FROM u") == 2);

  try {
    db.exec("INSERT INTO nowhere VALUES(1)");
    FAIL("exec did not throw");
  } catch (const kiwi::StoreError& e) {
    CHECK(std::string(e.what()) ==
          tmp.path() + ": no such table: nowhere (in: INSERT INTO nowhere VALUES(1))");
  }
  CHECK(db.try_exec("INSERT INTO nowhere VALUES(1)") != sql::kOk);

  sql::Connection missing;
  CHECK(missing.open((tmp.dir / "no" / "such" / "dir.db").string(), sql::Access::read_only) !=
        sql::kOk);
  CHECK_FALSE(missing.is_open());
  CHECK_THAT(missing.message(), Catch::Contains("unable to open database file"));

  // A file that is not a database: SQLite says so at the first read, as malformed.
  const std::string text_file = (tmp.dir / "text.db").string();
  {
    std::FILE* f = std::fopen(text_file.c_str(), "w");
    std::fputs("this is not sqlite, it is a text file long enough to have a header..........", f);
    std::fclose(f);
  }
  sql::Connection text;
  REQUIRE(text.open(text_file, sql::Access::read_only) == sql::kOk);
  sql::Statement read;
  CHECK(read.prepare(text, "SELECT name FROM sqlite_master") != sql::kOk);
  CHECK(sql::malformed(text.errcode()));
  CHECK_FALSE(sql::busy(text.errcode()));
}

TEST_CASE("sqlite wrapper: a statement reads the file it was prepared on, moved aside or closed") {
  TempDb tmp;
  const std::string aside = tmp.path() + ".corrupt-test";
  sql::Connection db = open_new(tmp.path());
  db.exec("CREATE TABLE t(x INTEGER); INSERT INTO t VALUES(1), (2)");
  sql::Statement select;
  REQUIRE(select.prepare(db, "SELECT count(*) FROM t") == sql::kOk);

  // Moved aside (as the store does with a damaged file) and a new file started in its place: the
  // old connection's statements still read the file they opened; a new connection the new one.
  fs::rename(tmp.path(), aside);
  sql::Connection fresh = open_new(tmp.path());
  fresh.exec("CREATE TABLE t(x INTEGER)");
  auto one = [](sql::Statement& st) {
    auto rows = st.query();
    REQUIRE(rows.next());
    return rows.int64(0);
  };
  CHECK(one(select) == 2);
  CHECK(count(fresh, "SELECT count(*) FROM t") == 0);

  // Closing the connection leaves its statement working: it holds the file open until it goes.
  db.close();
  CHECK_FALSE(db.is_open());
  CHECK(one(select) == 2);
  CHECK(open_descriptors(aside) == 1);
  select.finalize();
  CHECK(open_descriptors(aside) == 0);
  CHECK(select.execute() != sql::kDone);  // finalized: fails, does not crash
}
