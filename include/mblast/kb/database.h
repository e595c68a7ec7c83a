// A thin RAII layer over the SQLite C API for the knowledge base: one connection, prepared
// statements, write transactions. Every SQLite call is checked at its call site by
// MBLAST_SQLITE_CHECK, which records the expression, file and line.
//
// Failures that the person can act on (the file is locked, read-only, damaged, not a KB, or the
// disk is full) throw KbFileError, a UserError whose one-line message names the file and what to
// do. Anything else (a bug, out of memory) throws Error. A failure inside a Transaction rolls it
// back, so a KB is never left half-written.
//
// Threading: a Database is one connection; use it from one thread at a time. Separate
// processes and connections may share one file (WAL mode, busy timeout).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "mblast/error.h"

namespace mblast::kb {

// A locked, read-only, full, damaged or foreign KB file. code() is the primary SQLite result
// code (SQLITE_BUSY, SQLITE_READONLY, SQLITE_FULL, SQLITE_CORRUPT, SQLITE_NOTADB, ...) or
// SQLITE_ERROR for a schema problem found by mblast itself (too new, not a KB).
class KbFileError : public UserError {
 public:
  KbFileError(const std::string& what, int code) : UserError(what), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

class Database;

// Throws KbFileError or Error for a failed call (rc is neither SQLITE_OK, SQLITE_ROW nor
// SQLITE_DONE is the caller's test). Used by MBLAST_SQLITE_CHECK.
[[noreturn]] void throw_sqlite_error(const Database& db, int rc, const char* expr, const char* file, int line);

// Checks an int-returning SQLite call that must give SQLITE_OK.
#define MBLAST_SQLITE_CHECK(db, expr)                                                       \
  do {                                                                                      \
    const int mblast_sqlite_rc_ = (expr);                                                   \
    if (mblast_sqlite_rc_ != SQLITE_OK)                                                     \
      ::mblast::kb::throw_sqlite_error((db), mblast_sqlite_rc_, #expr, __FILE__, __LINE__); \
  } while (0)

class Statement {
 public:
  Statement() = default;
  Statement(const Database& db, std::string_view sql);  // throws on a syntax error
  ~Statement();
  Statement(Statement&& o) noexcept;
  Statement& operator=(Statement&& o) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Parameters are 1-based. An empty optional binds NULL.
  Statement& bind(int i, std::nullptr_t);
  Statement& bind(int i, int64_t v);
  Statement& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
  Statement& bind(int i, bool v) { return bind(i, static_cast<int64_t>(v ? 1 : 0)); }
  Statement& bind(int i, double v);
  Statement& bind(int i, std::string_view v);
  Statement& bind(int i, const std::string& v) { return bind(i, std::string_view(v)); }
  Statement& bind(int i, const char* v) { return bind(i, std::string_view(v)); }
  template <class T>
  Statement& bind(int i, const std::optional<T>& v) {
    return v ? bind(i, *v) : bind(i, nullptr);
  }
  // Binds parameters 1..n in order.
  template <class... A>
  Statement& bind_all(const A&... a) {
    int i = 0;
    (bind(++i, a), ...);
    return *this;
  }
  // Binds an empty string as NULL (optional foreign keys).
  Statement& bind_or_null(int i, std::string_view v) { return v.empty() ? bind(i, nullptr) : bind(i, v); }

  // Advances; true when a row is ready. Throws on failure.
  bool step();
  // Runs to completion (for INSERT/UPDATE); returns sqlite3_changes.
  int run();
  void reset();  // keeps bindings; clears the cursor

  bool is_null(int col) const;
  int64_t get_int(int col) const;
  double get_double(int col) const;
  std::optional<double> get_opt_double(int col) const;
  std::string get_text(int col) const;  // "" for NULL
  // The text without a copy; valid until the next step(), reset() or destruction.
  std::string_view get_view(int col) const;

 private:
  const Database* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

class Database {
 public:
  // read_only_immutable opens the file as a snapshot nobody changes (SQLite's immutable=1): the
  // way to read a WAL-mode file in a folder this process may not write.
  enum class Mode { read_write_create, read_write, read_only, read_only_immutable };

  // Opens a connection with foreign keys on and a busy timeout; never creates parent folders.
  // ":memory:" opens a private in-memory database.
  Database(const std::filesystem::path& file, Mode mode, int busy_timeout_ms);
  ~Database();
  Database(Database&& o) noexcept;
  Database& operator=(Database&& o) noexcept;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  sqlite3* handle() const { return db_; }
  const std::filesystem::path& file() const { return file_; }
  int busy_timeout_ms() const { return busy_timeout_ms_; }
  bool read_only() const { return mode_ == Mode::read_only || mode_ == Mode::read_only_immutable; }

  void exec(std::string_view sql);  // one or more statements without results
  Statement prepare(std::string_view sql) const { return Statement(*this, sql); }
  int64_t query_int(std::string_view sql) const;  // first column of the first row, 0 if none
  bool in_transaction() const { return db_ && !sqlite3_get_autocommit(db_); }

 private:
  void close() noexcept;

  sqlite3* db_ = nullptr;
  std::filesystem::path file_;
  Mode mode_ = Mode::read_only;
  int busy_timeout_ms_ = 0;
};

// A write transaction: BEGIN IMMEDIATE takes the write lock at once (waiting up to the busy
// timeout), so two writers never deadlock on a lock upgrade. Nested inside another transaction
// it becomes a SAVEPOINT. Destroyed without commit(): rolled back.
class Transaction {
 public:
  explicit Transaction(Database& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  void commit();

 private:
  Database& db_;
  bool nested_ = false;
  bool done_ = false;
  std::string savepoint_;
};

// A read transaction (BEGIN DEFERRED): every read inside sees one snapshot of the KB.
class ReadSnapshot {
 public:
  explicit ReadSnapshot(Database& db);
  ~ReadSnapshot();
  ReadSnapshot(const ReadSnapshot&) = delete;
  ReadSnapshot& operator=(const ReadSnapshot&) = delete;

 private:
  Database& db_;
  bool active_ = false;
};

}  // namespace mblast::kb
