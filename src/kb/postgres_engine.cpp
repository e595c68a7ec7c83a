// The PostgreSQL engine behind Database and Statement (see database.h), through libpq.
//
// Values travel as text both ways: integers in decimal, doubles as their shortest round-trip
// text (the server's extra_float_digits default gives the same back), so a KB holds the same
// numbers on either engine. The URL's password is used to connect and never shown: file() and
// every message carry redact_kb_location(url).
#include <fmt/format.h>
#include <libpq-fe.h>

#include <cctype>
#include <cstring>

#include "mblast/kb/database.h"

namespace mblast::kb {

namespace {

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  return true;
}

std::string first_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (const auto nl = s.find('\n'); nl != std::string::npos) s = s.substr(0, nl);
  return s;
}

std::string shortened(std::string_view sql) {
  std::string s(sql);
  for (char& c : s)
    if (c == '\n') c = ' ';
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

void ignore_notice(void*, const char*) {}

}  // namespace

bool is_postgresql_url(std::string_view location) {
  return starts_with_ci(location, "postgresql://") || starts_with_ci(location, "postgres://");
}

bool looks_like_url(std::string_view location) {
  const auto p = location.find("://");
  if (p == std::string_view::npos || p == 0) return false;
  if (!std::isalpha(static_cast<unsigned char>(location[0]))) return false;
  for (size_t i = 0; i < p; ++i) {
    const char c = location[i];
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.') return false;
  }
  return true;
}

std::string redact_kb_location(std::string_view location) {
  if (!looks_like_url(location)) return std::string(location);
  const size_t start = location.find("://") + 3;
  const size_t auth_end = std::min(location.find_first_of("/?", start), location.size());
  std::string out(location.substr(0, start));
  const std::string_view auth = location.substr(start, auth_end - start);
  if (const auto at = auth.rfind('@'); at != std::string_view::npos) {
    const std::string_view user = auth.substr(0, at);
    out += user.substr(0, user.find(':'));  // user[:password] -> user
    out += auth.substr(at);
  } else {
    out += auth;
  }
  std::string_view rest = location.substr(auth_end);
  const auto q = rest.find('?');
  out += rest.substr(0, q);
  if (q == std::string_view::npos) return out;
  // Query parameters: every one kept but password=...
  std::string_view query = rest.substr(q + 1);
  std::string kept;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    if (!starts_with_ci(param, "password=") && !param.empty()) kept += (kept.empty() ? "" : "&") + std::string(param);
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  if (!kept.empty()) out += "?" + kept;
  return out;
}

void hide_kb_passwords_in_arguments(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    std::string lower(arg);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const size_t at = std::min(lower.find("postgresql://"), lower.find("postgres://"));  // also in --kb=URL
    if (at == std::string::npos) continue;
    const std::string shown = std::string(arg.substr(0, at)) + redact_kb_location(arg.substr(at));
    if (shown == arg) continue;
    std::memset(argv[i], 0, arg.size());
    std::memcpy(argv[i], shown.data(), shown.size());  // never longer than the original
  }
}

std::string postgresql_placeholders(std::string_view sql) {
  std::string out;
  out.reserve(sql.size() + 16);
  int n = 0;
  for (size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    if (c == '\'' || c == '"') {  // a quoted literal or identifier ('' and "" escape themselves)
      const size_t end = sql.find(c, i + 1);
      const size_t stop = end == std::string_view::npos ? sql.size() : end + 1;
      out.append(sql.substr(i, stop - i));
      i = stop - 1;
    } else if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      const size_t end = sql.find('\n', i);
      const size_t stop = end == std::string_view::npos ? sql.size() : end;
      out.append(sql.substr(i, stop - i));
      i = stop - 1;
    } else if (c == '?') {
      out += fmt::format("${}", ++n);
    } else {
      out += c;
    }
  }
  return out;
}

// ---- Database -------------------------------------------------------------------------------

void Database::pg_connect(const std::string& url) {
  const char* keys[] = {"dbname", "connect_timeout", "fallback_application_name", nullptr};
  const char* values[] = {url.c_str(), "10", "mblast", nullptr};
  pg_ = PQconnectdbParams(keys, values, 1);
  if (!pg_) throw Error("libpq could not allocate a connection (out of memory)");
  if (PQstatus(pg_) != CONNECTION_OK) {
    const std::string why = first_line(PQerrorMessage(pg_));
    pg_close();
    throw KbFileError(fmt::format("cannot connect to knowledge base {}: {}; check that the server runs and that "
                                  "the URL, user and password (PGPASSWORD or ~/.pgpass) are right",
                                  file_.string(), why),
                      SQLITE_CANTOPEN);
  }
  PQsetNoticeProcessor(pg_, ignore_notice, nullptr);
  // Session settings (again after every reconnect): quiet notices, the busy timeout as the
  // longest wait for another writer's lock, and no writes at all on a read-only open.
  std::string setup = "SET client_min_messages = warning";
  if (busy_timeout_ms_ > 0) setup += fmt::format("; SET lock_timeout = {}", busy_timeout_ms_);
  if (read_only()) setup += "; SET default_transaction_read_only = on";
  pg_exec(setup);
}

void Database::pg_close() noexcept {
  if (pg_) {
    PQfinish(pg_);
    pg_ = nullptr;
  }
  pg_prepared_.clear();
}

bool Database::pg_in_transaction() const {
  if (pg_lost_tx_) return true;  // until the Transaction that lost it ends
  const auto s = PQtransactionStatus(pg_);
  return s == PQTRANS_INTRANS || s == PQTRANS_INERROR || s == PQTRANS_ACTIVE;
}

void Database::pg_ensure_connected() const {
  if (PQstatus(pg_) == CONNECTION_OK) return;
  if (pg_lost_tx_)
    throw KbFileError(fmt::format("the connection to knowledge base {} was lost inside a transaction; nothing of it "
                                  "was committed. Run the command again",
                                  file_.string()),
                      SQLITE_IOERR);
  PQreset(pg_);
  pg_prepared_.clear();  // the new session knows none of them
  if (PQstatus(pg_) != CONNECTION_OK)
    throw KbFileError(fmt::format("lost the connection to knowledge base {} and could not reconnect: {}; nothing "
                                  "more was written. Check the server and run the command again",
                                  file_.string(), first_line(PQerrorMessage(pg_))),
                      SQLITE_CANTOPEN);
  std::string setup = "SET client_min_messages = warning";
  if (busy_timeout_ms_ > 0) setup += fmt::format("; SET lock_timeout = {}", busy_timeout_ms_);
  if (read_only()) setup += "; SET default_transaction_read_only = on";
  PGresult* r = PQexec(pg_, setup.c_str());
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  if (!ok) throw_pg_error(r, setup);
  PQclear(r);
}

void Database::throw_pg_error(PGresult* res, const std::string& what) const {
  const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  const char* primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : nullptr;
  const std::string code = state ? state : "";
  std::string msg = primary ? std::string(primary) : first_line(PQerrorMessage(pg_));
  if (res) PQclear(res);
  const std::string kb = file_.string();
  const std::string detail = fmt::format("{} [{}{}]", msg, code.empty() ? "" : "SQLSTATE " + code + ": ", what);
  const bool lost = PQstatus(pg_) != CONNECTION_OK || code.starts_with("08") || code == "57P01" || code == "57P02";
  if (lost)
    throw KbFileError(
        fmt::format("lost the connection to knowledge base {} ({}); {}. Check the server and run the "
                    "command again",
                    kb, msg,
                    pg_lost_tx_ ? "nothing of the unfinished transaction was committed" : "nothing more was written"),
        SQLITE_IOERR);
  if (code == "40P01" || code == "40001")
    throw KbConflictError(fmt::format("knowledge base {}: the server undid this write to resolve a {} with another "
                                      "writer; nothing of it was kept [{}]",
                                      kb, code == "40P01" ? "deadlock" : "serialization conflict", detail),
                          SQLITE_BUSY);
  if (code == "55P03")
    throw KbFileError(fmt::format("knowledge base {} is locked by another writer (waited {} ms); nothing was "
                                  "written. Try again when it has finished, or wait longer with "
                                  "MBLAST_KB_BUSY_TIMEOUT_MS [{}]",
                                  kb, busy_timeout_ms_, detail),
                      SQLITE_BUSY);
  if (code == "25006" || code.starts_with("42501"))
    throw KbFileError(fmt::format("knowledge base {} cannot be written with this connection (read-only or no "
                                  "privilege); nothing was written [{}]",
                                  kb, detail),
                      SQLITE_READONLY);
  if (code == "53100")
    throw KbFileError(
        fmt::format("the disk of the server holding knowledge base {} is full; nothing was written [{}]", kb, detail),
        SQLITE_FULL);
  throw Error(fmt::format("knowledge base {}: {}", kb, detail));
}

// A KB writes and reads through a few dozen distinct statements, run thousands of times: each is
// parsed and planned once per connection. Past this many (SQL built from values would be a bug,
// but must not grow the server's memory without end) statements are sent unnamed, planned each time.
constexpr size_t kMaxPreparedPerConnection = 256;

pg_result* Database::pg_run_prepared(const std::string& sql, const std::vector<const char*>& values) const {
  const int n = static_cast<int>(values.size());
  auto it = pg_prepared_.find(sql);
  if (it == pg_prepared_.end()) {
    if (pg_prepared_.size() >= kMaxPreparedPerConnection)
      return PQexecParams(pg_, sql.c_str(), n, nullptr, values.data(), nullptr, nullptr, 0);
    const std::string name = fmt::format("mblast_{}", pg_prepared_.size() + 1);
    // Parameter types are inferred from the statement, as for an unnamed one.
    PGresult* r = PQprepare(pg_, name.c_str(), sql.c_str(), n, nullptr);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) return r;  // a syntax error, or the connection gone
    PQclear(r);
    it = pg_prepared_.emplace(sql, name).first;
  }
  return PQexecPrepared(pg_, it->second.c_str(), n, values.data(), nullptr, nullptr, 0);
}

void Database::pg_exec(std::string_view sql) {
  const std::string s(sql);
  pg_ensure_connected();
  const bool idle = PQtransactionStatus(pg_) == PQTRANS_IDLE;
  PGresult* r = PQexec(pg_, s.c_str());
  if (PQstatus(pg_) != CONNECTION_OK) {
    if (!idle)
      pg_lost_tx_ = true;
    else {
      if (r) PQclear(r);
      pg_ensure_connected();
      r = PQexec(pg_, s.c_str());
    }
  }
  const auto st = PQresultStatus(r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) throw_pg_error(r, shortened(s));
  PQclear(r);
}

void Database::pg_exec_quietly(const char* sql) noexcept {
  if (pg_lost_tx_) {
    // The server ended the lost transaction; the outermost end of it is where ours ends too.
    if (std::strcmp(sql, "ROLLBACK") == 0 || std::strcmp(sql, "COMMIT") == 0) pg_lost_tx_ = false;
    return;
  }
  if (PQstatus(pg_) != CONNECTION_OK) return;
  PQclear(PQexec(pg_, sql));
}

// ---- Statement ------------------------------------------------------------------------------

void Statement::pg_execute() {
  const Database& db = *db_;
  db.pg_ensure_connected();
  std::vector<const char*> values;
  values.reserve(pg_params_.size());
  for (const auto& p : pg_params_) values.push_back(p ? p->c_str() : nullptr);
  const bool idle = PQtransactionStatus(db.pg_) == PQTRANS_IDLE;
  PGresult* r = db.pg_run_prepared(pg_sql_, values);
  if (PQstatus(db.pg_) != CONNECTION_OK) {
    if (!idle)
      db.pg_lost_tx_ = true;
    else {  // one statement outside a transaction: nothing was half done; try it once more
      if (r) PQclear(r);
      db.pg_ensure_connected();
      r = db.pg_run_prepared(pg_sql_, values);
    }
  }
  const auto st = PQresultStatus(r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) db.throw_pg_error(r, shortened(pg_sql_));
  pg_res_ = r;
  pg_row_ = -1;
}

void Statement::pg_clear() noexcept {
  if (pg_res_) PQclear(pg_res_);
  pg_res_ = nullptr;
  pg_row_ = -1;
}

int Statement::pg_rows() const { return pg_res_ ? PQntuples(pg_res_) : 0; }

int Statement::pg_changes() const {
  const char* n = pg_res_ ? PQcmdTuples(pg_res_) : "";
  return *n ? std::atoi(n) : 0;
}

const char* Statement::pg_value(int col) const {
  if (!pg_res_ || pg_row_ < 0 || pg_row_ >= PQntuples(pg_res_) || col < 0 || col >= PQnfields(pg_res_)) return nullptr;
  if (PQgetisnull(pg_res_, pg_row_, col)) return nullptr;
  return PQgetvalue(pg_res_, pg_row_, col);
}

size_t Statement::pg_length(int col) const { return static_cast<size_t>(PQgetlength(pg_res_, pg_row_, col)); }

}  // namespace mblast::kb
