#include "mblast/kb/schema.h"

#include <algorithm>
#include <mutex>

#include <fmt/format.h>

#include "embedded_files.h"
#include "mblast/version.h"

namespace mblast::kb {

namespace {

std::vector<Migration> load_embedded_migrations() {
  std::vector<Migration> out;
  std::vector<std::pair<std::string, std::string>> postgresql;  // name, text
  for (const auto& f : embedded_files()) {
    const std::string_view prefix = "migrations/", pg_prefix = "migrations/postgresql/";
    if (f.path.substr(0, pg_prefix.size()) == pg_prefix && f.path.ends_with(".sql")) {
      postgresql.emplace_back(std::string(f.path.substr(pg_prefix.size())), std::string(f.content));
      continue;
    }
    if (f.path.substr(0, prefix.size()) != prefix || !f.path.ends_with(".sql")) continue;
    const std::string name(f.path.substr(prefix.size()));
    int version = 0;
    size_t i = 0;
    for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i)
      version = version * 10 + (name[i] - '0');
    if (i != 4 || i >= name.size() || name[i] != '_')
      throw Error("kb_schema/migrations/" + name + ": migration files are named NNNN_name.sql");
    out.push_back({version, name, std::string(f.content), {}});
  }
  std::sort(out.begin(), out.end(), [](const Migration& a, const Migration& b) { return a.version < b.version; });
  for (size_t k = 0; k < out.size(); ++k)
    if (out[k].version != static_cast<int>(k) + 1)
      throw Error(fmt::format("kb_schema/migrations: expected version {} next, found {}", k + 1, out[k].name));
  if (out.empty()) throw Error("no knowledge-base migrations were compiled into this mblast");
  // A PostgreSQL text replaces the portable one of the same name; one without a twin is a typo.
  for (auto& [name, text] : postgresql) {
    auto it = std::find_if(out.begin(), out.end(), [&](const Migration& m) { return m.name == name; });
    if (it == out.end())
      throw Error("kb_schema/migrations/postgresql/" + name + " has no migration of the same name beside it");
    it->postgresql_sql = std::move(text);
  }
  return out;
}

}  // namespace

const std::vector<Migration>& migrations() {
  static const std::vector<Migration> all = load_embedded_migrations();
  return all;
}

int latest_schema_version() { return migrations().back().version; }

// PostgreSQL has no user_version or application_id: one row of mblast_schema holds them.
constexpr const char* kPgCountTables =
    "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() "
    "AND table_type = 'BASE TABLE'";

SchemaState read_schema_state(const Database& db) {
  SchemaState s;
  if (db.is_postgresql()) {
    s.tables = static_cast<int>(db.query_int(kPgCountTables));
    if (db.query_int("SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() "
                     "AND table_name = 'mblast_schema'") > 0) {
      s.application_id = db.query_int("SELECT application_id FROM mblast_schema");
      s.user_version = static_cast<int>(db.query_int("SELECT user_version FROM mblast_schema"));
      --s.tables;  // mblast_schema itself
    }
    return s;
  }
  s.application_id = db.query_int("PRAGMA application_id");
  s.user_version = static_cast<int>(db.query_int("PRAGMA user_version"));
  s.tables = static_cast<int>(db.query_int("SELECT count(*) FROM sqlite_schema WHERE type = 'table'"));
  return s;
}

void check_schema_state(const Database& db, const SchemaState& s, int latest) {
  const std::string kb = db.file().string();
  const bool ours = s.application_id == kApplicationId;
  const bool empty = s.application_id == 0 && s.user_version == 0 && s.tables == 0;
  if (!ours && !empty)
    throw KbFileError(db.is_postgresql()
                          ? fmt::format("database {} already holds {} tables of another application, not a mblast "
                                        "knowledge base; nothing was written. Create an empty database for the KB "
                                        "(createdb) and pass its URL",
                                        kb, s.tables)
                          : fmt::format("{} is an SQLite database of another application (application_id {:#x}, {} "
                                        "tables), not a mblast knowledge base; nothing was written. Pass --kb with "
                                        "another path",
                                        kb, s.application_id, s.tables),
                      SQLITE_ERROR);
  if (s.user_version > latest)
    throw KbFileError(fmt::format("knowledge base {} has schema version {}, newer than this mblast {} knows ({}); "
                                  "nothing was written. Use a newer mblast, or export it there (`mblast kb export`) "
                                  "and import the file here",
                                  kb, s.user_version, kMblastVersion, latest),
                      SQLITE_ERROR);
}

int migrate(Database& db, std::span<const Migration> all, int target) {
  Transaction tx(db);
  // PostgreSQL: one migrator at a time (SQLite's BEGIN IMMEDIATE already is that lock).
  if (db.is_postgresql()) db.exec(fmt::format("SELECT pg_advisory_xact_lock({})", kApplicationId));
  const SchemaState s = read_schema_state(db);  // again, under the write lock
  check_schema_state(db, s, target);
  if (s.user_version >= target) return s.user_version;  // someone else got there first
  for (const auto& m : all) {
    if (m.version <= s.user_version || m.version > target) continue;
    db.exec(m.sql_for(db.engine()));
  }
  if (db.is_postgresql()) {
    db.exec("CREATE TABLE IF NOT EXISTS mblast_schema (application_id BIGINT NOT NULL, user_version BIGINT NOT NULL)");
    db.exec("DELETE FROM mblast_schema");
    db.exec(fmt::format("INSERT INTO mblast_schema VALUES ({}, {})", kApplicationId, target));
    tx.commit();
    return s.user_version;
  }
  db.exec(fmt::format("PRAGMA user_version = {}", target));
  db.exec(fmt::format("PRAGMA application_id = {}", kApplicationId));
  tx.commit();
  return s.user_version;
}

}  // namespace mblast::kb
