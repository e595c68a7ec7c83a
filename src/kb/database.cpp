#include "mblast/kb/database.h"

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include <fmt/format.h>

namespace mblast::kb {

namespace fs = std::filesystem;

void throw_sqlite_error(const Database& db, int rc, const char* expr, const char* file, int line) {
  const int primary = rc & 0xff;
  const std::string detail = describe_call(
      db.handle() ? std::string(sqlite3_errmsg(db.handle())) : std::string(sqlite3_errstr(rc)), expr, file, line);
  const std::string kb = db.file().string();
  switch (primary) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      throw KbFileError(fmt::format("knowledge base {} is locked by another process (waited {} ms); nothing was "
                                    "written. Try again when it has finished, or wait longer with "
                                    "MBLAST_KB_BUSY_TIMEOUT_MS [{}]",
                                    kb, db.busy_timeout_ms(), detail),
                        primary);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      throw KbFileError(fmt::format("knowledge base {} is damaged or not an SQLite database; nothing was written. "
                                    "Restore it from a backup, or move it aside and run `mblast kb init` [{}]",
                                    kb, detail),
                        primary);
    case SQLITE_READONLY:
      throw KbFileError(fmt::format("knowledge base {} cannot be written here (read-only file, folder or "
                                    "connection); nothing was written. Make it writable, or pass --kb with a "
                                    "writable copy [{}]",
                                    kb, detail),
                        primary);
    case SQLITE_FULL:
      throw KbFileError(fmt::format("the disk holding knowledge base {} is full; nothing was written. Free some "
                                    "space and run the command again [{}]",
                                    kb, detail),
                        primary);
    case SQLITE_IOERR:
      throw KbFileError(fmt::format("I/O error on knowledge base {} (disk full, file too large, or device "
                                    "gone?); nothing was written. Check the disk and run the command again [{}]",
                                    kb, detail),
                        primary);
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      throw KbFileError(fmt::format("cannot open knowledge base {}; check that its folder exists and that you "
                                    "may read and write it [{}]",
                                    kb, detail),
                        primary);
    default:
      throw Error(fmt::format("knowledge base {}: {}", kb, detail));
  }
}

// ---- Statement ----------------------------------------------------------------------------

Statement::Statement(const Database& db, std::string_view sql) : db_(&db) {
  if (db.is_postgresql()) {
    pg_sql_ = postgresql_placeholders(sql);
    return;
  }
  MBLAST_SQLITE_CHECK(db,
                      sqlite3_prepare_v3(db.handle(), sql.data(), static_cast<int>(sql.size()), 0, &stmt_, nullptr));
}

Statement::~Statement() {
  if (stmt_) sqlite3_finalize(stmt_);
  pg_clear();
}

Statement::Statement(Statement&& o) noexcept
    : db_(o.db_),
      stmt_(o.stmt_),
      pg_sql_(std::move(o.pg_sql_)),
      pg_params_(std::move(o.pg_params_)),
      pg_res_(o.pg_res_),
      pg_row_(o.pg_row_) {
  o.stmt_ = nullptr;
  o.pg_res_ = nullptr;
}

Statement& Statement::operator=(Statement&& o) noexcept {
  if (this != &o) {
    if (stmt_) sqlite3_finalize(stmt_);
    pg_clear();
    db_ = o.db_;
    stmt_ = o.stmt_;
    o.stmt_ = nullptr;
    pg_sql_ = std::move(o.pg_sql_);
    pg_params_ = std::move(o.pg_params_);
    pg_res_ = o.pg_res_;
    pg_row_ = o.pg_row_;
    o.pg_res_ = nullptr;
  }
  return *this;
}

namespace {
void set_param(std::vector<std::optional<std::string>>& params, int i, std::optional<std::string> v) {
  if (i < 1) throw Error(fmt::format("statement parameter {} is out of range (they count from 1)", i));
  if (params.size() < static_cast<size_t>(i)) params.resize(static_cast<size_t>(i));
  params[static_cast<size_t>(i) - 1] = std::move(v);
}
}  // namespace

Statement& Statement::bind(int i, std::nullptr_t) {
  if (db_->is_postgresql()) return set_param(pg_params_, i, std::nullopt), *this;
  MBLAST_SQLITE_CHECK(*db_, sqlite3_bind_null(stmt_, i));
  return *this;
}

Statement& Statement::bind(int i, int64_t v) {
  if (db_->is_postgresql()) return set_param(pg_params_, i, std::to_string(v)), *this;
  MBLAST_SQLITE_CHECK(*db_, sqlite3_bind_int64(stmt_, i, v));
  return *this;
}

Statement& Statement::bind(int i, double v) {
  // Shortest text that reads back as the same double: both engines then hold the same value.
  if (db_->is_postgresql()) return set_param(pg_params_, i, fmt::format("{}", v)), *this;
  MBLAST_SQLITE_CHECK(*db_, sqlite3_bind_double(stmt_, i, v));
  return *this;
}

Statement& Statement::bind(int i, std::string_view v) {
  if (db_->is_postgresql()) return set_param(pg_params_, i, std::string(v)), *this;
  MBLAST_SQLITE_CHECK(*db_, sqlite3_bind_text64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
  return *this;
}

bool Statement::step() {
  if (db_->is_postgresql()) {
    if (!pg_res_) pg_execute();
    return ++pg_row_ < pg_rows();
  }
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  // Name the statement, not this wrapper: its SQL (shortened) is the expression that failed.
  std::string sql = sqlite3_sql(stmt_) ? sqlite3_sql(stmt_) : "";
  if (sql.size() > 60) sql = sql.substr(0, 57) + "...";
  throw_sqlite_error(*db_, rc, ("sqlite3_step: " + sql).c_str(), __FILE__, __LINE__);
}

int Statement::run() {
  if (db_->is_postgresql()) {
    pg_clear();
    pg_execute();
    return pg_changes();
  }
  while (step()) {
  }
  return sqlite3_changes(db_->handle());
}

void Statement::reset() {
  if (db_ && db_->is_postgresql()) return pg_clear();
  sqlite3_reset(stmt_);  // returns the last step's error, already reported by step()
}

bool Statement::is_null(int col) const {
  if (db_->is_postgresql()) return pg_value(col) == nullptr;
  return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
}

int64_t Statement::get_int(int col) const {
  if (db_->is_postgresql()) {
    const char* v = pg_value(col);
    return v ? std::strtoll(v, nullptr, 10) : 0;
  }
  return sqlite3_column_int64(stmt_, col);
}

double Statement::get_double(int col) const {
  if (db_->is_postgresql()) {
    const char* v = pg_value(col);
    return v ? std::strtod(v, nullptr) : 0.0;
  }
  return sqlite3_column_double(stmt_, col);
}

std::optional<double> Statement::get_opt_double(int col) const {
  if (is_null(col)) return std::nullopt;
  return get_double(col);
}

std::string Statement::get_text(int col) const {
  if (db_->is_postgresql()) return std::string(get_view(col));
  const auto* p = sqlite3_column_text(stmt_, col);
  if (!p) return {};
  return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
}

std::string_view Statement::get_view(int col) const {
  if (db_->is_postgresql()) {
    const char* v = pg_value(col);
    return v ? std::string_view(v, pg_length(col)) : std::string_view();
  }
  const auto* p = sqlite3_column_text(stmt_, col);
  if (!p) return {};
  return {reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, col))};
}

// ---- Database -----------------------------------------------------------------------------

Database::Database(const fs::path& file, Mode mode, int busy_timeout_ms)
    : file_(file), mode_(mode), busy_timeout_ms_(busy_timeout_ms) {
  if (is_postgresql_url(file.string())) {
    file_ = redact_kb_location(file.string());
    pg_connect(file.string());
    return;
  }
  if (looks_like_url(file.string()))
    throw KbFileError(fmt::format("knowledge base {}: only postgresql:// URLs (or a file path) are understood",
                                  redact_kb_location(file.string())),
                      SQLITE_CANTOPEN);
  int flags = SQLITE_OPEN_NOMUTEX;
  switch (mode) {
    case Mode::read_write_create:
      flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
      break;
    case Mode::read_write:
      flags |= SQLITE_OPEN_READWRITE;
      break;
    case Mode::read_only:
      flags |= SQLITE_OPEN_READONLY;
      break;
    case Mode::read_only_immutable:
      flags |= SQLITE_OPEN_READONLY | SQLITE_OPEN_URI;
      break;
  }
  std::string name = file.string();
  if (mode == Mode::read_only_immutable) {
    std::string uri = "file:";
    for (const char c : fs::absolute(file).string()) {
      if (c == '?' || c == '#' || c == '%')
        uri += fmt::format("%{:02X}", static_cast<unsigned char>(c));
      else
        uri += c;
    }
    name = uri + "?immutable=1";
  }
  const int rc = sqlite3_open_v2(name.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    // The handle (when there is one) carries the message; release it after reporting.
    struct Closer {
      Database* d;
      ~Closer() { d->close(); }
    } closer{this};
    throw_sqlite_error(*this, rc, "sqlite3_open_v2(name.c_str(), &db_, flags, nullptr)", __FILE__, __LINE__);
  }
  sqlite3_extended_result_codes(db_, 1);
  MBLAST_SQLITE_CHECK(*this, sqlite3_busy_timeout(db_, busy_timeout_ms));
  exec("PRAGMA foreign_keys = ON");
}

Database::~Database() { close(); }

Database::Database(Database&& o) noexcept
    : db_(o.db_),
      pg_(o.pg_),
      pg_lost_tx_(o.pg_lost_tx_),
      pg_prepared_(std::move(o.pg_prepared_)),
      file_(std::move(o.file_)),
      mode_(o.mode_),
      busy_timeout_ms_(o.busy_timeout_ms_) {
  o.db_ = nullptr;
  o.pg_ = nullptr;
}

Database& Database::operator=(Database&& o) noexcept {
  if (this != &o) {
    close();
    db_ = o.db_;
    pg_ = o.pg_;
    o.pg_ = nullptr;
    pg_lost_tx_ = o.pg_lost_tx_;
    pg_prepared_ = std::move(o.pg_prepared_);
    o.pg_prepared_.clear();
    file_ = std::move(o.file_);
    mode_ = o.mode_;
    busy_timeout_ms_ = o.busy_timeout_ms_;
    o.db_ = nullptr;
  }
  return *this;
}

void Database::close() noexcept {
  pg_close();
  if (db_) {
    sqlite3_close_v2(db_);  // statements are owned by Statement objects that finalize themselves
    db_ = nullptr;
  }
}

void Database::exec(std::string_view sql) {
  if (pg_) return pg_exec(sql);
  const std::string s(sql);
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err);
  sqlite3_free(err);  // the same text is in sqlite3_errmsg
  if (rc != SQLITE_OK)
    throw_sqlite_error(*this, rc, s.size() > 80 ? (s.substr(0, 77) + "...").c_str() : s.c_str(), __FILE__, __LINE__);
}

int64_t Database::query_int(std::string_view sql) const {
  Statement st(*this, sql);
  return st.step() ? st.get_int(0) : 0;
}

bool Database::in_transaction() const {
  if (pg_) return pg_in_transaction();
  return db_ && !sqlite3_get_autocommit(db_);
}

void Database::exec_quietly(const char* sql) noexcept {
  if (pg_) return pg_exec_quietly(sql);
  if (db_) sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
}

// ---- Transactions -------------------------------------------------------------------------

Transaction::Transaction(Database& db) : db_(db) {
  if (db_.in_transaction()) {
    static std::atomic<unsigned> counter{0};
    nested_ = true;
    savepoint_ = "mblast_sp_" + std::to_string(++counter);
    db_.exec("SAVEPOINT " + savepoint_);
  } else {
    // PostgreSQL: READ COMMITTED; writers meet on unique keys (ON CONFLICT) and row locks, and
    // statistics are incremented in place, so no lock on the whole KB is needed.
    db_.exec(db_.is_postgresql() ? "BEGIN" : "BEGIN IMMEDIATE");
  }
}

Transaction::~Transaction() {
  if (done_) return;
  // Never throws: a failed statement may already have rolled the transaction back.
  if (nested_) {
    if (db_.in_transaction()) {
      const std::string sql = "ROLLBACK TO " + savepoint_ + "; RELEASE " + savepoint_;
      db_.exec_quietly(sql.c_str());
    }
  } else if (db_.in_transaction()) {
    db_.exec_quietly("ROLLBACK");
  }
}

void Transaction::commit() {
  if (nested_)
    db_.exec("RELEASE " + savepoint_);
  else
    db_.exec("COMMIT");
  done_ = true;
}

void retry_on_conflict(Database& db, const std::function<void()>& body, int attempts) {
  if (db.in_transaction()) return body();
  thread_local std::minstd_rand rng{std::random_device{}()};
  for (int attempt = 1;; ++attempt) {
    try {
      return body();
    } catch (const KbConflictError& e) {
      if (attempt >= attempts)
        throw KbConflictError(fmt::format("{} (gave up after {} tries; run the command again)", e.what(), attempt),
                              e.code());
    }
    const int base_ms = 5 << std::min(attempt - 1, 8);
    std::this_thread::sleep_for(std::chrono::milliseconds(base_ms + static_cast<int>(rng() % base_ms)));
  }
}

ReadSnapshot::ReadSnapshot(Database& db) : db_(db) {
  if (!db_.in_transaction()) {
    db_.exec(db_.is_postgresql() ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" : "BEGIN DEFERRED");
    active_ = true;
  }
}

ReadSnapshot::~ReadSnapshot() {
  if (active_ && db_.in_transaction()) db_.exec_quietly("COMMIT");
}

}  // namespace mblast::kb
