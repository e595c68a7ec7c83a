// A thin RAII layer over the SQLite C API for the knowledge base: one connection, prepared
// statements, write transactions. Every SQLite call is checked at its call site by
// MBLAST_SQLITE_CHECK, which records the expression, file and line.
//
// Failures that the person can act on (the file is locked, read-only, damaged, not a KB, or the
// disk is full) throw KbFileError, a UserError whose one-line message names the file and what to
// do. Anything else (a bug, out of memory) throws Error. A failure inside a Transaction rolls it
// back, so a KB is never left half-written.
//
// Two engines sit behind this API: SQLite (a file, the default) and PostgreSQL (a server, for a
// team: `--kb postgresql://USER@HOST[:PORT]/DB`, through libpq). SQL is written once with `?`
// placeholders; the PostgreSQL engine numbers them ($1, $2, ...) and exchanges values as text.
//
// Threading: a Database is one connection; use it from one thread at a time. Separate
// processes and connections may share one file (WAL mode, busy timeout) or one server.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "mblast/error.h"

struct pg_conn;    // libpq's PGconn
struct pg_result;  // libpq's PGresult

namespace mblast::kb {

enum class Engine { sqlite, postgresql };

// True for a KB location that names a PostgreSQL server (postgresql://... or postgres://...).
bool is_postgresql_url(std::string_view location);
// True for anything that looks like a URL (scheme://...): never to be taken as a file path.
bool looks_like_url(std::string_view location);
// The location as it may be shown: a URL without its password (and without a password=...
// query parameter); a file path unchanged.
std::string redact_kb_location(std::string_view location);
// Rewrites, in place, every program argument that holds a KB URL with a password into its
// redacted form (the rest of its bytes zeroed), so that `ps` and /proc/PID/cmdline stop showing
// the secret. Call it after copying the arguments for parsing: argv then no longer has it.
void hide_kb_passwords_in_arguments(int argc, char** argv);

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

// A write the server undid so that another could go on: PostgreSQL chose its transaction as the
// victim of a deadlock (SQLSTATE 40P01) or could not serialize it (40001). Nothing of that
// transaction was kept, and running it again whole normally succeeds: retry_on_conflict does that.
class KbConflictError : public KbFileError {
 public:
  using KbFileError::KbFileError;
};

class Database;

// How many times in all retry_on_conflict runs a transaction the server keeps undoing.
inline constexpr int kConflictAttempts = 6;

// Runs body, which writes inside a Transaction of its own, and when the server undoes that
// transaction for a conflict with another writer (KbConflictError), runs it again whole, up to
// `attempts` times in all, after a random pause that doubles each time (5-10 ms, 10-20 ms, ...) so
// that the writers part. Inside an outer transaction body runs once and a conflict goes up: only the
// outermost transaction can be redone. SQLite never raises one (BEGIN IMMEDIATE serializes writers).
void retry_on_conflict(Database& db, const std::function<void()>& body, int attempts = kConflictAttempts);

// `?` placeholders as PostgreSQL's $1, $2, ... (quoted text and identifiers are left alone).
std::string postgresql_placeholders(std::string_view sql);

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
  // Runs to completion (for INSERT/UPDATE); returns the number of rows changed.
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
  // PostgreSQL: the statement is sent with its parameters on the first step(); the whole result
  // is then held here and stepped through.
  void pg_execute();
  void pg_clear() noexcept;
  int pg_rows() const;
  int pg_changes() const;
  const char* pg_value(int col) const;  // null for NULL
  size_t pg_length(int col) const;

  const Database* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  std::string pg_sql_;  // with $n placeholders
  std::vector<std::optional<std::string>> pg_params_;
  pg_result* pg_res_ = nullptr;
  int pg_row_ = -1;
};

class Database {
 public:
  // read_only_immutable opens the file as a snapshot nobody changes (SQLite's immutable=1): the
  // way to read a WAL-mode file in a folder this process may not write.
  enum class Mode { read_write_create, read_write, read_only, read_only_immutable };

  // Opens a connection with foreign keys on and a busy timeout; never creates parent folders.
  // ":memory:" opens a private in-memory database. A postgresql:// URL connects to that server
  // (the password, if any, from the URL, PGPASSWORD, ~/.pgpass or libpq's environment);
  // busy_timeout_ms becomes its lock_timeout. file() is then the URL without its password.
  Database(const std::filesystem::path& file, Mode mode, int busy_timeout_ms);
  ~Database();
  Database(Database&& o) noexcept;
  Database& operator=(Database&& o) noexcept;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  Engine engine() const { return pg_ ? Engine::postgresql : Engine::sqlite; }
  bool is_postgresql() const { return pg_ != nullptr; }
  sqlite3* handle() const { return db_; }  // null for PostgreSQL
  pg_conn* pg_handle() const { return pg_; }
  const std::filesystem::path& file() const { return file_; }
  int busy_timeout_ms() const { return busy_timeout_ms_; }
  bool read_only() const { return mode_ == Mode::read_only || mode_ == Mode::read_only_immutable; }

  void exec(std::string_view sql);  // one or more statements without results
  Statement prepare(std::string_view sql) const { return Statement(*this, sql); }
  int64_t query_int(std::string_view sql) const;  // first column of the first row, 0 if none
  bool in_transaction() const;
  // Runs sql (no results wanted) and ignores any failure: rollbacks in destructors.
  void exec_quietly(const char* sql) noexcept;

 private:
  friend class Statement;
  void close() noexcept;
  void pg_close() noexcept;
  void pg_connect(const std::string& url);
  void pg_exec(std::string_view sql);
  void pg_exec_quietly(const char* sql) noexcept;
  bool pg_in_transaction() const;
  // A connection found broken outside a transaction is re-established once (a restarted
  // server); inside one, the failure is reported and nothing of the transaction was committed.
  void pg_ensure_connected() const;
  // Sends sql with its parameters as a statement prepared once per connection (parsed and planned
  // once, then only bound and run); the caller checks the result.
  pg_result* pg_run_prepared(const std::string& sql, const std::vector<const char*>& values) const;
  [[noreturn]] void throw_pg_error(pg_result* res, const std::string& what) const;

  sqlite3* db_ = nullptr;
  pg_conn* pg_ = nullptr;
  mutable bool pg_lost_tx_ = false;  // the connection died inside a transaction not yet ended
  // Statements prepared on this connection: SQL text -> server-side name. Emptied on reconnect
  // (a new session has none).
  mutable std::unordered_map<std::string, std::string> pg_prepared_;
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
