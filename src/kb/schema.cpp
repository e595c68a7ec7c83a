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
  for (const auto& f : embedded_files()) {
    const std::string_view prefix = "migrations/";
    if (f.path.substr(0, prefix.size()) != prefix || !f.path.ends_with(".sql")) continue;
    const std::string name(f.path.substr(prefix.size()));
    int version = 0;
    size_t i = 0;
    for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i) version = version * 10 + (name[i] - '0');
    if (i != 4 || i >= name.size() || name[i] != '_')
      throw Error("kb_schema/migrations/" + name + ": migration files are named NNNN_name.sql");
    out.push_back({version, name, std::string(f.content)});
  }
  std::sort(out.begin(), out.end(), [](const Migration& a, const Migration& b) { return a.version < b.version; });
  for (size_t k = 0; k < out.size(); ++k)
    if (out[k].version != static_cast<int>(k) + 1)
      throw Error(fmt::format("kb_schema/migrations: expected version {} next, found {}", k + 1, out[k].name));
  if (out.empty()) throw Error("no knowledge-base migrations were compiled into this mblast");
  return out;
}

}  // namespace

const std::vector<Migration>& migrations() {
  static const std::vector<Migration> all = load_embedded_migrations();
  return all;
}

int latest_schema_version() { return migrations().back().version; }

SchemaState read_schema_state(const Database& db) {
  SchemaState s;
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
    throw KbFileError(fmt::format("{} is an SQLite database of another application (application_id {:#x}, {} tables), "
                                  "not a mblast knowledge base; nothing was written. Pass --kb with another path",
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
  const SchemaState s = read_schema_state(db);  // again, under the write lock
  check_schema_state(db, s, target);
  if (s.user_version >= target) return s.user_version;  // someone else got there first
  for (const auto& m : all) {
    if (m.version <= s.user_version || m.version > target) continue;
    db.exec(m.sql);
  }
  db.exec(fmt::format("PRAGMA user_version = {}", target));
  db.exec(fmt::format("PRAGMA application_id = {}", kApplicationId));
  tx.commit();
  return s.user_version;
}

}  // namespace mblast::kb
