// The store's one door to SQLite: a connection and its prepared statements as objects that clean
// up after themselves, so no list of statements to finalize is kept by hand, and no other file of
// the store calls the sqlite3 API (sqlite.cpp alone includes <sqlite3.h>). SQLite's own split is
// the model (wal.h, pager.h): this layer knows SQLite and nothing of the history; the layers above
// it (schema, catalog, writer, reader, query) know the history and nothing of sqlite3_*.
//
//   sql::Connection db;
//   if (db.open(path, sql::Access::read_only) != sql::kOk) throw StoreError(db.message());
//   sql::Statement st;
//   if (st.prepare(db, "SELECT ts, data FROM blocks WHERE ts BETWEEN ?1 AND ?2") != sql::kOk)
//     throw db.error("cannot prepare statement");
//   for (auto rows = st.query(from, to); rows.next();) use(rows.int64(0), rows.blob(1));
//
// Ownership: a statement holds a share of its connection, so the file stays open until the
// Connection and every statement prepared on it are gone (a statement never outlives the handle
// it runs on); a statement is finalized by its destructor. A Rows is one run of a statement: it
// binds, steps and reads columns, and resets the statement when it goes out of scope, so no
// statement keeps a read transaction (a WAL snapshot) open past its use and each run starts afresh.
// Threads: connections are opened without SQLite's mutex (SQLITE_OPEN_NOMUTEX): a connection and
// its statements are used by one thread at a time, and a statement by one Rows at a time.
#pragma once

#include <cstdint>
#include <kiwi/model.hpp>
#include <memory>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace kiwi::agent::sql {

// The result codes callers test for by value (SQLite's own numbers, fixed by its API; sqlite.cpp
// checks them against <sqlite3.h>).
inline constexpr int kOk = 0;
inline constexpr int kRow = 100;
inline constexpr int kDone = 101;
// SQLITE_CORRUPT or SQLITE_NOTADB (extended codes too): a file SQLite cannot read as a database,
// damaged or not one at all.
bool malformed(int code);
// SQLITE_BUSY: another connection holds a lock SQLite waited for in vain.
bool busy(int code);
// Whether this SQLite has the VFS called `name` ("unix-excl").
bool has_vfs(const char* name);

enum class Access { read_only, read_write_create };

class Connection {
 public:
  Connection() = default;
  Connection(Connection&&) noexcept = default;
  Connection& operator=(Connection&&) noexcept = default;
  ~Connection() = default;  // the file closes when the statements prepared on it are gone too

  // Opens `path` (created if absent with read_write_create) through the VFS named `vfs`
  // (nullptr: the default one). An SQLite result code; on failure the connection stays closed and
  // message() says why in SQLite's words.
  int open(const std::string& path, Access access, const char* vfs = nullptr);
  bool is_open() const { return db_ != nullptr; }
  void close();  // drops this object's share of the handle (see the top of this file)
  const std::string& path() const { return path_; }

  void busy_timeout(int ms);
  // Runs `sql` (one statement or several, no rows wanted). Throws StoreError
  // "<path>: <SQLite's message> (in: <sql>)".
  void exec(const char* sql);
  // The same, without throwing: an SQLite result code.
  int try_exec(const char* sql);

  // The result code of the last call that failed on this connection (kOk or a row code if none
  // did), and SQLite's message for it; after a failed open(), that open's.
  int errcode() const;
  std::string message() const;
  // StoreError "<path>: <what>: <message()>".
  StoreError error(std::string_view what) const;
  // Rows changed by the last INSERT, UPDATE or DELETE.
  int changes() const;
  // Statements prepared on this connection and not yet finalized.
  int statements() const;

 private:
  friend class Statement;
  std::shared_ptr<sqlite3> db_;
  std::string path_;
  int open_code_ = kOk;
  std::string open_message_;
};

// A blob parameter bound without a copy: its bytes must stay valid until the run ends
// (SQLITE_STATIC). Text is always copied.
struct Blob {
  std::string_view bytes;
};

class Rows;

class Statement {
 public:
  Statement() = default;
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  ~Statement();  // finalizes

  // Prepares `sql` on `db`, finalizing the statement this held. `persistent`: kept and run many
  // times (SQLITE_PREPARE_PERSISTENT), else prepared for a run or two. An SQLite result code; on
  // failure the statement is empty and db.message() says why.
  int prepare(Connection& db, const char* sql, bool persistent = true);
  explicit operator bool() const { return st_ != nullptr; }
  void finalize();

  // One run, with `args` bound to ?1, ?2, ... in order (each as Rows::bind takes it).
  template <class... Args>
  Rows query(const Args&... args);
  // Runs a statement that returns no rows (an INSERT, a DELETE) to its end: kDone, or the error's
  // result code. Reset at once either way.
  template <class... Args>
  int execute(const Args&... args);

  // Stepped and not yet reset (a run in progress).
  bool busy() const;

 private:
  friend class Rows;
  std::shared_ptr<sqlite3> db_;
  sqlite3_stmt* st_ = nullptr;
};

// One run of a statement. Reads a row's columns by index (0-based); parameters are bound by index
// (1-based, ?1). A bind that fails makes the run fail (next() false, code() the error).
class Rows {
 public:
  explicit Rows(Statement& st) : st_(st.st_) {}
  Rows(Rows&& other) noexcept : st_(other.st_), code_(other.code_) { other.st_ = nullptr; }
  Rows& operator=(Rows&&) = delete;
  Rows(const Rows&) = delete;
  Rows& operator=(const Rows&) = delete;
  ~Rows();  // resets the statement: the next run binds it afresh

  Rows& bind(int index, std::int64_t v);
  Rows& bind(int index, int v);
  Rows& bind(int index, double v);
  Rows& bind(int index, std::string_view text);  // copied
  Rows& bind(int index, const char* text) { return bind(index, std::string_view(text)); }
  Rows& bind(int index, const std::string& text) { return bind(index, std::string_view(text)); }
  Rows& bind(int index, Blob blob);  // not copied

  // Steps: true with a row to read; false at the end (and after it), or on an error (failed(),
  // code()).
  bool next();
  // kRow or kDone after a step, else the error's result code (kOk before the first step).
  int code() const { return code_; }
  bool failed() const { return code_ != kOk && code_ != kRow && code_ != kDone; }

  std::int64_t int64(int column) const;
  int int32(int column) const;
  double real(int column) const;
  bool null(int column) const;
  // Views valid until the next step (or the end of the run); "" for NULL.
  std::string_view text(int column) const;
  std::string_view blob(int column) const;

 private:
  sqlite3_stmt* st_;
  int code_ = kOk;
};

template <class... Args>
Rows Statement::query(const Args&... args) {
  Rows rows(*this);
  int index = 0;
  (rows.bind(++index, args), ...);
  return rows;
}

template <class... Args>
int Statement::execute(const Args&... args) {
  Rows rows = query(args...);
  while (rows.next()) {
  }
  return rows.code();
}

}  // namespace kiwi::agent::sql
