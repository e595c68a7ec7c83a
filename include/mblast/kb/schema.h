// Versioned migrations of the knowledge-base schema (kb_schema/migrations/NNNN_name.sql, compiled
// into the binary). PRAGMA user_version is the version of a KB file; PRAGMA application_id marks
// it as a mblast KB.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "mblast/kb/database.h"

namespace mblast::kb {

inline constexpr int64_t kApplicationId = 0x6d626b62;  // "mbkb"

struct Migration {
  int version = 0;             // NNNN of the file name; versions run 1, 2, 3, ... without gaps
  std::string name;            // "0002_retrieval_indexes.sql"
  std::string sql;             // kb_schema/migrations/NNNN_name.sql (SQLite, and PostgreSQL when portable)
  std::string postgresql_sql;  // kb_schema/migrations/postgresql/NNNN_name.sql, when the dialects differ
  const std::string& sql_for(Engine e) const {
    return e == Engine::postgresql && !postgresql_sql.empty() ? postgresql_sql : sql;
  }
};

// The embedded migrations, in order. Checked once: a gap or duplicate is an Error.
const std::vector<Migration>& migrations();
// The newest schema this binary knows (the last migration's version).
int latest_schema_version();

// What a KB file is, read without writing anything.
struct SchemaState {
  int64_t application_id = 0;
  int user_version = 0;
  int tables = 0;  // rows in sqlite_schema of type 'table' (PostgreSQL: tables of the current schema)
};
SchemaState read_schema_state(const Database& db);

// Refuses what mblast must not touch, with a KbFileError naming the file and what to do:
// another application's SQLite database, and a KB newer than `latest`.
void check_schema_state(const Database& db, const SchemaState& s, int latest);

// Brings the KB to `target` by applying the migrations above its version in one write
// transaction, which also sets user_version and application_id; on any failure the file is left
// at its old version. Another process migrating at the same time is harmless (the version is
// read again under the write lock). Returns the version found before migrating.
int migrate(Database& db, std::span<const Migration> all, int target);

}  // namespace mblast::kb
