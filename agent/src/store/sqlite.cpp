#include "store/sqlite.hpp"

#include <sqlite3.h>

namespace kiwi::agent::sql {

static_assert(kOk == SQLITE_OK && kRow == SQLITE_ROW && kDone == SQLITE_DONE);

bool malformed(int code) {
  code &= 0xff;
  return code == SQLITE_CORRUPT || code == SQLITE_NOTADB;
}

bool busy(int code) {
  return code == SQLITE_BUSY;
}

bool has_vfs(const char* name) {
  return sqlite3_vfs_find(name) != nullptr;
}

int Connection::open(const std::string& path, Access access, const char* vfs) {
  close();
  path_ = path;
  open_message_.clear();
  const int flags = (access == Access::read_only ? SQLITE_OPEN_READONLY
                                                 : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
                    SQLITE_OPEN_NOMUTEX;
  sqlite3* db = nullptr;
  open_code_ = sqlite3_open_v2(path.c_str(), &db, flags, vfs);
  if (open_code_ != SQLITE_OK) {
    // SQLite may hand back a handle that says why: read the message before closing it.
    open_message_ = db ? sqlite3_errmsg(db) : sqlite3_errstr(open_code_);
    sqlite3_close(db);
    return open_code_;
  }
  // Closed with the last share: every statement holds one, so none is left unfinalized then and
  // sqlite3_close() cannot fail with SQLITE_BUSY (and leave the file open).
  db_.reset(db, [](sqlite3* h) { sqlite3_close(h); });
  return SQLITE_OK;
}

void Connection::close() {
  db_.reset();
}

void Connection::busy_timeout(int ms) {
  if (db_) sqlite3_busy_timeout(db_.get(), ms);
}

int Connection::try_exec(const char* sql) {
  return db_ ? sqlite3_exec(db_.get(), sql, nullptr, nullptr, nullptr) : SQLITE_MISUSE;
}

void Connection::exec(const char* sql) {
  char* err = nullptr;
  const int rc = db_ ? sqlite3_exec(db_.get(), sql, nullptr, nullptr, &err) : SQLITE_MISUSE;
  if (rc != SQLITE_OK) {
    std::string msg = path_ + ": " +
                      (err   ? err
                       : db_ ? "error"
                             : "not open") +
                      " (in: " + sql + ")";
    sqlite3_free(err);
    throw StoreError(msg);
  }
}

int Connection::errcode() const {
  return db_ ? sqlite3_errcode(db_.get()) : open_code_;
}

std::string Connection::message() const {
  if (db_) return sqlite3_errmsg(db_.get());
  return open_message_.empty() ? "not open" : open_message_;
}

StoreError Connection::error(std::string_view what) const {
  return StoreError(path_ + ": " + std::string(what) + ": " + message());
}

int Connection::changes() const {
  return db_ ? sqlite3_changes(db_.get()) : 0;
}

int Connection::statements() const {
  int n = 0;
  if (db_)
    for (sqlite3_stmt* st = sqlite3_next_stmt(db_.get(), nullptr); st;
         st = sqlite3_next_stmt(db_.get(), st))
      ++n;
  return n;
}

Statement::Statement(Statement&& other) noexcept : db_(std::move(other.db_)), st_(other.st_) {
  other.st_ = nullptr;
}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    finalize();
    db_ = std::move(other.db_);
    st_ = other.st_;
    other.st_ = nullptr;
  }
  return *this;
}

Statement::~Statement() {
  finalize();
}

void Statement::finalize() {
  sqlite3_finalize(st_);  // before the share of the handle goes: it may be the last
  st_ = nullptr;
  db_.reset();
}

int Statement::prepare(Connection& db, const char* sql, bool persistent) {
  finalize();
  if (!db.db_) return SQLITE_MISUSE;
  sqlite3_stmt* st = nullptr;
  const int rc = persistent ? sqlite3_prepare_v3(db.db_.get(), sql, -1, SQLITE_PREPARE_PERSISTENT,
                                                 &st, nullptr)
                            : sqlite3_prepare_v2(db.db_.get(), sql, -1, &st, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(st);
    return rc;
  }
  st_ = st;
  db_ = db.db_;
  return SQLITE_OK;
}

bool Statement::busy() const {
  return st_ && sqlite3_stmt_busy(st_);
}

Rows::~Rows() {
  if (st_) sqlite3_reset(st_);
}

namespace {
// A bind's result: the first failure is the run's.
void note(int& code, int rc) {
  if (rc != SQLITE_OK && code == SQLITE_OK) code = rc;
}
}  // namespace

Rows& Rows::bind(int index, std::int64_t v) {
  note(code_, st_ ? sqlite3_bind_int64(st_, index, v) : SQLITE_MISUSE);
  return *this;
}

Rows& Rows::bind(int index, int v) {
  note(code_, st_ ? sqlite3_bind_int(st_, index, v) : SQLITE_MISUSE);
  return *this;
}

Rows& Rows::bind(int index, double v) {
  note(code_, st_ ? sqlite3_bind_double(st_, index, v) : SQLITE_MISUSE);
  return *this;
}

Rows& Rows::bind(int index, std::string_view text) {
  note(code_, st_ ? sqlite3_bind_text(st_, index, text.data(), static_cast<int>(text.size()),
                                      SQLITE_TRANSIENT)
                  : SQLITE_MISUSE);
  return *this;
}

Rows& Rows::bind(int index, Blob blob) {
  note(code_, st_ ? sqlite3_bind_blob(st_, index, blob.bytes.data(),
                                      static_cast<int>(blob.bytes.size()), SQLITE_STATIC)
                  : SQLITE_MISUSE);
  return *this;
}

bool Rows::next() {
  if (!st_) code_ = SQLITE_MISUSE;
  // At the end it stays there: SQLite would reset the statement and run it again.
  if (failed() || code_ == SQLITE_DONE) return false;
  code_ = sqlite3_step(st_);
  return code_ == SQLITE_ROW;
}

std::int64_t Rows::int64(int column) const {
  return sqlite3_column_int64(st_, column);
}

int Rows::int32(int column) const {
  return sqlite3_column_int(st_, column);
}

double Rows::real(int column) const {
  return sqlite3_column_double(st_, column);
}

bool Rows::null(int column) const {
  return sqlite3_column_type(st_, column) == SQLITE_NULL;
}

std::string_view Rows::text(int column) const {
  auto* data = reinterpret_cast<const char*>(sqlite3_column_text(st_, column));
  return {data ? data : "", static_cast<std::size_t>(sqlite3_column_bytes(st_, column))};
}

std::string_view Rows::blob(int column) const {
  auto* data = static_cast<const char*>(sqlite3_column_blob(st_, column));
  return {data ? data : "", static_cast<std::size_t>(sqlite3_column_bytes(st_, column))};
}

}  // namespace kiwi::agent::sql
