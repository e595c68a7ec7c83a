#include "mblast/kb/exchange.h"

#include <algorithm>
#include <istream>
#include <ostream>
#include <set>

#include <fmt/format.h>

#include "mblast/kb/knowledge_base.h"
#include "mblast/kb/schema.h"

namespace mblast::kb {

using nlohmann::json;

namespace {

// How one column travels: as a string, a nullable string, a nullable number, a boolean, an
// integer, an embedded JSON value, or (the provenance_id column) an inline provenance object.
enum class Type { text, opt_text, real, boolean, integer, json_value, provenance };

struct Column {
  const char* name;
  Type type;
};

struct Kind {
  const char* kind;
  const char* table;
  const char* key;  // primary-key column (constraint_evidence: composite, see record_key)
  std::vector<Column> columns;
};

// Dependency order: a row comes after every row it refers to.
const std::vector<Kind>& kinds() {
  using T = Type;
  static const std::vector<Kind> k = {
      {"target",
       "targets",
       "name",
       {{"name", T::text},
        {"backend", T::text},
        {"arch", T::text},
        {"spec", T::json_value},
        {"provenance_id", T::provenance},
        {"created_at", T::text}}},
      {"problem",
       "problems",
       "id",
       {{"id", T::text},
        {"name", T::text},
        {"op_class", T::text},
        {"spec", T::json_value},
        {"provenance_id", T::provenance},
        {"created_at", T::text}}},
      {"build_log", "build_logs", "id", {{"id", T::text}, {"text", T::text}}},
      {"candidate",
       "candidates",
       "id",
       {{"id", T::text},
        {"backend", T::text},
        {"problem_id", T::opt_text},
        {"source", T::text},
        {"provenance_id", T::provenance},
        {"created_at", T::text}}},
      {"action",
       "actions",
       "id",
       {{"id", T::text},
        {"title", T::text},
        {"summary", T::text},
        {"when_helps", T::text},
        {"when_hurts", T::text},
        {"parameters", T::json_value},
        {"applies_to", T::json_value},
        {"prior_log_speedup", T::real},
        {"source", T::text},
        {"provenance_id", T::provenance},
        {"created_at", T::text}}},
      {"run",
       "runs",
       "id",
       {{"id", T::text},
        {"candidate_id", T::text},
        {"problem_id", T::opt_text},
        {"target", T::text},
        {"correct", T::boolean},
        {"failure_kind", T::opt_text},
        {"median_s", T::real},
        {"spread_pct", T::real},
        {"bandwidth_fraction", T::real},
        {"compute_fraction", T::real},
        {"build_log_id", T::opt_text},
        {"result", T::json_value},
        {"provenance_id", T::provenance},
        {"created_at", T::text}}},
      {"state",
       "states",
       "id",
       {{"id", T::text},
        {"target", T::opt_text},
        {"backend", T::text},
        {"arch", T::text},
        {"op_class", T::text},
        {"log10_intensity", T::real},
        {"bandwidth_fraction", T::real},
        {"compute_fraction", T::real},
        {"utilisation", T::real},
        {"bottleneck", T::text},
        {"cluster", T::text},
        {"problem_id", T::opt_text},
        {"candidate_id", T::opt_text},
        {"run_id", T::opt_text},
        {"text", T::text},
        {"provenance_id", T::provenance},
        {"created_at", T::text}}},
      {"experience",
       "experiences",
       "id",
       {{"id", T::text},
        {"state_id", T::text},
        {"action_id", T::text},
        {"problem_id", T::opt_text},
        {"target", T::text},
        {"parent_candidate_id", T::opt_text},
        {"candidate_id", T::opt_text},
        {"run_id", T::opt_text},
        {"after_state_id", T::opt_text},
        {"correct", T::boolean},
        {"failure_kind", T::opt_text},
        {"speedup", T::real},
        {"log_speedup", T::real},
        {"critic_text", T::text},
        {"model", T::text},
        {"prompt_hash", T::text},
        {"provenance_id", T::provenance},
        {"created_at", T::text}}},
      {"constraint",
       "constraints",
       "id",
       {{"id", T::text},
        {"action_id", T::opt_text},
        {"backend", T::text},
        {"text", T::text},
        {"predicate", T::json_value},
        {"effect", T::text},
        {"provenance_id", T::provenance},
        {"created_at", T::text}}},
      {"constraint_evidence",
       "constraint_evidence",
       "constraint_id, experience_id",
       {{"constraint_id", T::text}, {"experience_id", T::text}}},
      {"text_version",
       "text_versions",
       "id",
       {{"id", T::text},
        {"subject_kind", T::text},
        {"subject_id", T::text},
        {"field", T::text},
        {"parent_id", T::opt_text},
        {"version", T::integer},
        {"body", T::text},
        {"author", T::text},
        {"provenance_id", T::provenance},
        {"created_at", T::text}}},
  };
  return k;
}

const Kind* find_kind(const std::string& name) {
  for (const auto& k : kinds())
    if (name == k.kind) return &k;
  return nullptr;
}

std::string json_field_name(const Column& c) { return c.type == Type::provenance ? "provenance" : c.name; }

std::string select_sql(const Kind& k) {
  std::string cols;
  for (const auto& c : k.columns) {
    if (!cols.empty()) cols += ", ";
    cols += c.type == Type::provenance ? std::string("p.kind, p.source") : std::string("t.") + c.name;
  }
  const bool has_prov =
      std::any_of(k.columns.begin(), k.columns.end(), [](const Column& c) { return c.type == Type::provenance; });
  // The key may name two columns ("constraint_id, experience_id"); qualify each.
  std::string order = std::string("t.") + k.key;
  for (size_t p = order.find(", "); p != std::string::npos; p = order.find(", ", p + 2)) order.insert(p + 2, "t.");
  return fmt::format("SELECT {} FROM {} t{} ORDER BY {}", cols, k.table,
                     has_prov ? " JOIN provenance p ON p.id = t.provenance_id" : "", order);
}

json read_row(const Kind& k, const Statement& st) {
  json r = json::object();
  r["kind"] = k.kind;
  int i = 0;
  for (const auto& c : k.columns) {
    switch (c.type) {
      case Type::text:
        r[c.name] = st.get_text(i++);
        break;
      case Type::opt_text:
        r[c.name] = st.is_null(i) ? json(nullptr) : json(st.get_text(i));
        ++i;
        break;
      case Type::real:
        r[c.name] = st.is_null(i) ? json(nullptr) : json(st.get_double(i));
        ++i;
        break;
      case Type::boolean:
        r[c.name] = st.get_int(i++) != 0;
        break;
      case Type::integer:
        r[c.name] = st.get_int(i++);
        break;
      case Type::json_value:
        r[c.name] = json::parse(st.get_text(i++), nullptr, false);
        break;
      case Type::provenance:
        r["provenance"] = {{"kind", st.get_text(i)}, {"source", st.get_text(i + 1)}};
        i += 2;
        break;
    }
  }
  return r;
}

const json& field(const json& rec, const std::string& name) {
  if (!rec.contains(name)) throw UserError(fmt::format("missing field '{}'", name));
  return rec[name];
}

std::string text_of(const json& rec, const std::string& name) {
  const json& v = field(rec, name);
  if (!v.is_string()) throw UserError(fmt::format("field '{}' must be a string", name));
  return v.get<std::string>();
}

void bind_field(KnowledgeBase& kb, Statement& st, int i, const Column& c, const json& rec) {
  const std::string name = json_field_name(c);
  const json& v = field(rec, name);
  switch (c.type) {
    case Type::text:
      if (!v.is_string()) throw UserError(fmt::format("field '{}' must be a string", name));
      st.bind(i, v.get<std::string>());
      break;
    case Type::opt_text:
      if (v.is_null())
        st.bind(i, nullptr);
      else if (v.is_string())
        st.bind(i, v.get<std::string>());
      else
        throw UserError(fmt::format("field '{}' must be a string or null", name));
      break;
    case Type::real:
      if (v.is_null())
        st.bind(i, nullptr);
      else if (v.is_number())
        st.bind(i, v.get<double>());
      else
        throw UserError(fmt::format("field '{}' must be a number or null", name));
      break;
    case Type::boolean:
      if (!v.is_boolean()) throw UserError(fmt::format("field '{}' must be true or false", name));
      st.bind(i, v.get<bool>());
      break;
    case Type::integer:
      if (!v.is_number_integer()) throw UserError(fmt::format("field '{}' must be an integer", name));
      st.bind(i, v.get<int64_t>());
      break;
    case Type::json_value:
      st.bind(i, v.dump());
      break;
    case Type::provenance: {
      if (!v.is_object()) throw UserError("field 'provenance' must be {\"kind\": ..., \"source\": ...}");
      st.bind(i, kb.provenance_row({text_of(v, "kind"), text_of(v, "source")}));
      break;
    }
  }
}

std::string insert_sql(const Kind& k) {
  std::string cols, marks;
  for (const auto& c : k.columns) {
    if (!cols.empty()) {
      cols += ", ";
      marks += ", ";
    }
    cols += c.name;
    marks += "?";
  }
  return fmt::format("INSERT INTO {} ({}) VALUES ({}) ON CONFLICT DO NOTHING", k.table, cols, marks);
}

json without_created_at(json r) {
  r.erase("created_at");
  return r;
}

}  // namespace

int ImportReport::total_added() const {
  int n = 0;
  for (const auto& [k, v] : added) n += v;
  return n;
}

std::string record_key(const json& r) {
  const std::string kind = r.value("kind", "");
  if (kind == "constraint_evidence") return r.value("constraint_id", "") + "/" + r.value("experience_id", "");
  if (kind == "target") return r.value("name", "");
  return r.value("id", "");
}

std::vector<json> export_records(KnowledgeBase& kb) {
  ReadSnapshot snapshot(kb.db());
  std::vector<json> out;
  out.push_back({{"kind", "header"},
                 {"format", "mblast-kb"},
                 {"format_version", kExportFormatVersion},
                 {"schema_version", kb.schema_version()}});
  for (const auto& k : kinds()) {
    Statement st(kb.db(), select_sql(k));
    while (st.step()) {
      json r = read_row(k, st);
      if (std::string(k.kind) == "action") {
        Statement b(kb.db(), "SELECT backend FROM action_backends WHERE action_id = ? ORDER BY backend");
        b.bind(1, r["id"].get<std::string>());
        json backends = json::array();
        while (b.step()) backends.push_back(b.get_text(0));
        r["backends"] = backends;
      }
      out.push_back(std::move(r));
    }
  }
  return out;
}

void write_jsonl(const std::vector<json>& records, std::ostream& out) {
  for (const auto& r : records) out << r.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
}

std::vector<json> read_jsonl(std::istream& in, const std::string& name) {
  std::vector<json> out;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw UserError(fmt::format("{}:{}: not a JSON object", name, n));
    if (out.empty()) {
      if (j.value("kind", "") != "header" || j.value("format", "") != "mblast-kb")
        throw UserError(
            fmt::format("{}:{}: not a mblast KB export (the first line must be the header "
                        "{{\"kind\": \"header\", \"format\": \"mblast-kb\", ...}})",
                        name, n));
      if (j.value("format_version", 0) > kExportFormatVersion)
        throw UserError(
            fmt::format("{}: export format version {} is newer than this mblast reads ({}); use a newer "
                        "mblast",
                        name, j.value("format_version", 0), kExportFormatVersion));
    }
    out.push_back(std::move(j));
  }
  if (out.empty()) throw UserError(fmt::format("{}: empty file, not a mblast KB export", name));
  return out;
}

namespace {

ImportReport import_records_once(KnowledgeBase& kb, const std::vector<json>& records) {
  ImportReport report;
  if (records.empty() || records.front().value("kind", "") != "header")
    throw UserError("not a mblast KB export: the first record must be the header");
  Database& db = kb.db();
  Transaction tx(db);
  // Text versions may name a parent later in the file: check references at the end.
  db.exec(db.is_postgresql() ? "SET CONSTRAINTS ALL DEFERRED" : "PRAGMA defer_foreign_keys = ON");
  std::map<std::string, Statement> inserts;
  for (size_t n = 1; n < records.size(); ++n) {
    const json& rec = records[n];
    const std::string kind = rec.value("kind", "");
    try {
      const Kind* k = find_kind(kind);
      if (!k) throw UserError(fmt::format("unknown record kind '{}'", kind));
      auto it = inserts.find(kind);
      if (it == inserts.end()) it = inserts.emplace(kind, Statement(db, insert_sql(*k))).first;
      Statement& st = it->second;
      st.reset();
      int i = 0;
      for (const auto& c : k->columns) bind_field(kb, st, ++i, c, rec);
      const bool added = st.run() > 0;
      (added ? report.added : report.present)[kind]++;
      if (kind == "action") {
        const std::string id = text_of(rec, "id");
        const json& backends = field(rec, "backends");
        if (!backends.is_array() || backends.empty()) throw UserError("field 'backends' must be a non-empty list");
        for (const auto& b : backends) {
          if (!b.is_string()) throw UserError("field 'backends' must list strings");
          Statement ins(db, "INSERT INTO action_backends (action_id, backend) VALUES (?, ?) ON CONFLICT DO NOTHING");
          ins.bind_all(id, b.get<std::string>()).run();
        }
        if (!added) {
          // Same action id, maybe other text: keep both (theirs becomes a version of ours).
          Statement ours(db,
                         "SELECT title, summary, when_helps, when_hurts, parameters, applies_to, prior_log_speedup "
                         "FROM actions WHERE id = ?");
          ours.bind(1, id);
          ours.step();
          const char* fields[] = {"title", "summary", "when_helps", "when_hurts"};
          for (int f = 0; f < 4; ++f) {
            const std::string theirs = text_of(rec, fields[f]);
            if (ours.get_text(f) == theirs || kb.current_text("action", id, fields[f]) == theirs) continue;
            const json& prov = field(rec, "provenance");
            kb.add_text_version("action", id, fields[f], theirs, "import",
                                {text_of(prov, "kind"), text_of(prov, "source")});
            ++report.texts_kept_as_versions;
          }
          const bool same_meta = json::parse(ours.get_text(4), nullptr, false) == field(rec, "parameters") &&
                                 json::parse(ours.get_text(5), nullptr, false) == field(rec, "applies_to") &&
                                 (ours.is_null(6) ? field(rec, "prior_log_speedup").is_null()
                                                  : field(rec, "prior_log_speedup") == json(ours.get_double(6)));
          if (!same_meta)
            report.conflicts.push_back(fmt::format("action {}: parameters, applies_to or prior differ; kept ours", id));
        }
      } else if (kind == "target" && !added) {
        Statement ours(db, "SELECT backend, arch, spec FROM targets WHERE name = ?");
        ours.bind(1, text_of(rec, "name"));
        ours.step();
        if (ours.get_text(0) != text_of(rec, "backend") || ours.get_text(1) != text_of(rec, "arch") ||
            json::parse(ours.get_text(2), nullptr, false) != field(rec, "spec"))
          report.conflicts.push_back(
              fmt::format("target {}: backend, arch or description differ; kept ours", text_of(rec, "name")));
      }
    } catch (const KbFileError&) {
      throw;  // the KB, not the record: a conflict to retry, a lost connection
    } catch (const UserError& e) {
      throw UserError(
          fmt::format("record {} ({} {}): {}; nothing was imported", n + 1, kind, record_key(rec), e.what()));
    }
  }
  if (db.is_postgresql()) {
    try {
      db.exec("SET CONSTRAINTS ALL IMMEDIATE");  // checks every deferred reference now
    } catch (const KbFileError&) {
      throw;
    } catch (const Error& e) {
      throw UserError(
          fmt::format("the records refer to rows they do not contain ({}); nothing was imported", e.what()));
    }
  } else {
    Statement fk(db, "PRAGMA foreign_key_check");
    if (fk.step())
      throw UserError(
          fmt::format("the records refer to rows they do not contain (a row of {} refers to a missing "
                      "row of {}); nothing was imported",
                      fk.get_text(0), fk.get_text(2)));
  }
  tx.commit();
  return report;
}

}  // namespace

ImportReport import_records(KnowledgeBase& kb, const std::vector<json>& records) {
  ImportReport report;
  retry_on_conflict(kb.db(), [&] { report = import_records_once(kb, records); });
  return report;
}

std::vector<std::pair<std::string, std::string>> find_records(KnowledgeBase& kb, const std::string& id) {
  std::vector<std::pair<std::string, std::string>> exact, prefixed;
  if (id.empty()) return exact;
  for (const auto& k : kinds()) {
    if (std::string(k.kind) == "constraint_evidence" || std::string(k.kind) == "build_log") continue;
    Statement eq(kb.db(), fmt::format("SELECT {0} FROM {1} WHERE {0} = ?", k.key, k.table));
    eq.bind(1, id);
    if (eq.step()) exact.emplace_back(k.kind, eq.get_text(0));
    if (id.size() < 4) continue;
    // Prefix match on the key; '%', '_' in an id would be wildcards, so compare with substr.
    Statement pre(kb.db(), fmt::format("SELECT {0} FROM {1} WHERE substr({0}, 1, ?) = ? LIMIT 20", k.key, k.table));
    pre.bind_all(static_cast<int64_t>(id.size()), id);
    while (pre.step()) prefixed.emplace_back(k.kind, pre.get_text(0));
  }
  return exact.empty() ? prefixed : exact;
}

std::optional<json> fetch_record(KnowledgeBase& kb, const std::string& kind, const std::string& key) {
  const Kind* k = find_kind(kind);
  if (!k || std::string(k->kind) == "constraint_evidence") return std::nullopt;
  std::string sql = select_sql(*k);
  sql = sql.substr(0, sql.find(" ORDER BY")) + fmt::format(" WHERE t.{} = ?", k->key);
  Statement st(kb.db(), sql);
  st.bind(1, key);
  if (!st.step()) return std::nullopt;
  json r = read_row(*k, st);
  if (kind == "action") {
    Statement b(kb.db(), "SELECT backend FROM action_backends WHERE action_id = ? ORDER BY backend");
    b.bind(1, key);
    json backends = json::array();
    while (b.step()) backends.push_back(b.get_text(0));
    r["backends"] = backends;
  }
  return r;
}

ImportReport merge_from(KnowledgeBase& kb, const std::filesystem::path& other) {
  KnowledgeBase theirs = KnowledgeBase::snapshot_of(other);
  return import_records(kb, export_records(theirs));
}

DiffReport diff_records(const std::vector<json>& here, const std::vector<json>& there) {
  using Index = std::map<std::pair<std::string, std::string>, json>;
  const auto index = [](const std::vector<json>& recs) {
    Index ix;
    for (const auto& r : recs) {
      const std::string kind = r.value("kind", "");
      if (kind == "header") continue;
      ix[{kind, record_key(r)}] = without_created_at(r);
    }
    return ix;
  };
  const Index a = index(here), b = index(there);
  DiffReport d;
  for (const auto& [key, rec] : a) {
    auto it = b.find(key);
    if (it == b.end())
      d.only_here[key.first].push_back(key.second);
    else if (it->second != rec)
      d.different[key.first].push_back(key.second);
  }
  for (const auto& [key, rec] : b)
    if (!a.count(key)) d.only_there[key.first].push_back(key.second);
  return d;
}

}  // namespace mblast::kb
