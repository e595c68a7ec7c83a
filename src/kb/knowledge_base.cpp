#include "mblast/kb/knowledge_base.h"
#include "mblast/kb/seed.h"

#include <cmath>
#include <cstdlib>
#include <span>
#include <system_error>

#include <fmt/format.h>

#include "mblast/kb/exchange.h"
#include "mblast/kb/schema.h"
#include "mblast/tensor.h"
#include "state_index.h"

namespace mblast::kb {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string hash_text(const std::string& s) { return content_hash_hex(std::as_bytes(std::span(s.data(), s.size()))); }

int busy_timeout_from_env(int requested) {
  if (requested >= 0) return requested;
  if (const char* v = std::getenv("MBLAST_KB_BUSY_TIMEOUT_MS"); v && *v) {
    char* end = nullptr;
    const long ms = std::strtol(v, &end, 10);
    if (end && *end == '\0' && ms >= 0) return static_cast<int>(ms);
    throw UserError(fmt::format("MBLAST_KB_BUSY_TIMEOUT_MS must be a number of milliseconds, got '{}'", v));
  }
  return 10000;
}

// A file cut short (header intact, pages missing) is found here rather than on the first read
// of a missing page. In WAL mode the newest pages may live in the -wal file, so the check only
// applies when there is none.
void check_not_truncated(const Database& db) {
  if (db.file() == ":memory:") return;
  std::error_code ec;
  const auto size = fs::file_size(db.file(), ec);
  if (ec) return;
  const auto wal = fs::path(db.file().string() + "-wal");
  if (fs::exists(wal, ec) && fs::file_size(wal, ec) > 0) return;
  const int64_t pages = db.query_int("PRAGMA page_count");
  const int64_t page_size = db.query_int("PRAGMA page_size");
  if (static_cast<int64_t>(size) < pages * page_size)
    throw KbFileError(fmt::format("knowledge base {} is damaged: it is {} bytes but its header counts {} pages of {} "
                                  "bytes (truncated?); nothing was written. Restore it from a backup, or move it "
                                  "aside and run `mblast kb init`",
                                  db.file().string(), size, pages, page_size),
                      SQLITE_CORRUPT);
}

const char* kTextFields[] = {"title", "summary", "when_helps", "when_hurts"};

bool valid_subject_field(const std::string& kind, const std::string& field) {
  if (kind == "action") {
    for (const char* f : kTextFields)
      if (field == f) return true;
    return false;
  }
  if (kind == "state" || kind == "constraint") return field == "text";
  return false;
}

std::string base_text_sql(const std::string& kind, const std::string& field) {
  // Field names are checked by valid_subject_field before this is built.
  if (kind == "action") return "SELECT " + field + " FROM actions WHERE id = ?";
  if (kind == "state") return "SELECT text FROM states WHERE id = ?";
  return "SELECT text FROM constraints WHERE id = ?";
}

// One write transaction of the KB, redone whole when the server undoes it for a conflict with
// another writer (see retry_on_conflict); nested in a caller's transaction, it runs once.
template <class F>
std::string write_transaction(Database& db, F&& body) {
  std::string out;
  retry_on_conflict(db, [&] {
    Transaction tx(db);
    out = body();
    tx.commit();
  });
  return out;
}

}  // namespace

fs::path default_kb_path() {
  if (const char* v = std::getenv("MBLAST_KB"); v && *v) return v;
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) return fs::path(x) / "mblast" / "kb.sqlite";
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : "/tmp") / ".local" / "share" / "mblast" / "kb.sqlite";
}

// ---- opening --------------------------------------------------------------------------------

KnowledgeBase::KnowledgeBase(Database db, bool created, int migrated_from)
    : db_(std::move(db)), created_(created), migrated_from_(migrated_from) {}

KnowledgeBase::KnowledgeBase(const fs::path& file, const OpenOptions& o)
    : db_([&] {
        const int busy = busy_timeout_from_env(o.busy_timeout_ms);
        // A URL is a server (or a mistake): never a path whose folders we would create.
        if (looks_like_url(file.string()))
          return Database(file, o.read_only ? Database::Mode::read_only : Database::Mode::read_write_create, busy);
        if (o.read_only) {
          if (!fs::exists(file))
            throw KbFileError(fmt::format("there is no knowledge base at {}; create it with `mblast kb init --kb {}`",
                                          file.string(), file.string()),
                              SQLITE_CANTOPEN);
          return Database(file, Database::Mode::read_only, busy);
        }
        std::error_code ec;
        if (file.has_parent_path()) fs::create_directories(file.parent_path(), ec);
        if (ec)
          throw KbFileError(
              fmt::format("cannot create the folder of knowledge base {}: {}", file.string(), ec.message()),
              SQLITE_CANTOPEN);
        return Database(file, Database::Mode::read_write_create, busy);
      }()) {
  const int target = o.target_version > 0 ? o.target_version : latest_schema_version();
  SchemaState s;
  try {
    s = read_schema_state(db_);  // a garbage file fails here (SQLITE_NOTADB)
  } catch (const KbFileError& e) {
    // A WAL-mode file whose folder we may not write cannot even be read normally (SQLite must
    // create its -shm index); read it as an immutable snapshot, so queries on a shared,
    // read-only KB work. Writes then fail with the read-only error.
    if (db_.is_postgresql() || (e.code() != SQLITE_READONLY && e.code() != SQLITE_CANTOPEN) || !fs::exists(file)) throw;
    db_ = Database(file, Database::Mode::read_only_immutable, db_.busy_timeout_ms());
    statements_.clear();
    s = read_schema_state(db_);
  }
  check_schema_state(db_, s, latest_schema_version());
  check_not_truncated(db_);
  migrated_from_ = s.user_version;
  // A connection SQLite opened read-only (the file is not writable) still serves reads of a
  // current KB; its first write fails with a clear KbFileError.
  const bool writable = !o.read_only && (db_.is_postgresql() || !sqlite3_db_readonly(db_.handle(), "main"));
  // Retrieval scans every state's signature: keep up to 64 MiB of pages in this connection
  // rather than re-reading them from the OS on every query.
  if (!db_.is_postgresql()) db_.exec("PRAGMA cache_size = -65536");
  if (writable && !db_.is_postgresql()) {
    db_.exec("PRAGMA journal_mode = WAL");
    db_.exec("PRAGMA synchronous = FULL");  // a commit survives power loss, not only kill -9
  }
  if (s.user_version < target) {
    if (!writable)
      throw KbFileError(fmt::format("knowledge base {} has schema version {} and needs migrating to {}, but it is "
                                    "opened read-only; open it once with write access to upgrade it",
                                    db_.file().string(), s.user_version, target),
                        SQLITE_READONLY);
    migrated_from_ = migrate(db_, migrations(), target);
    created_ = migrated_from_ == 0;
    // The seed is part of a new KB: the first run ranks by its priors, and an action a run
    // names is the seed's row, never a "learned" copy of it without its priors.
    if (created_ && o.seed && target == latest_schema_version()) load_seed(*this, embedded_seed());
  }
}

KnowledgeBase KnowledgeBase::snapshot_of(const fs::path& file) {
  if (looks_like_url(file.string())) {
    // A server KB: one consistent read of it (export_records reads in one snapshot), imported
    // into memory, so `kb merge` and `kb diff` work from a server as from a file.
    OpenOptions o;
    o.read_only = true;
    KnowledgeBase server(file, o);
    KnowledgeBase mem = in_memory();
    import_records(mem, export_records(server));
    return mem;
  }
  if (!fs::exists(file))
    throw KbFileError(fmt::format("there is no knowledge base at {}", file.string()), SQLITE_CANTOPEN);
  Database src(file, Database::Mode::read_only, busy_timeout_from_env(-1));
  SchemaState s;
  try {
    s = read_schema_state(src);
  } catch (const KbFileError& e) {  // a WAL-mode file in a folder we may not write (see above)
    if (e.code() != SQLITE_READONLY && e.code() != SQLITE_CANTOPEN) throw;
    src = Database(file, Database::Mode::read_only_immutable, src.busy_timeout_ms());
    s = read_schema_state(src);
  }
  check_schema_state(src, s, latest_schema_version());
  check_not_truncated(src);
  Database mem(":memory:", Database::Mode::read_write_create, 0);
  sqlite3_backup* b = sqlite3_backup_init(mem.handle(), "main", src.handle(), "main");
  if (!b) throw_sqlite_error(mem, sqlite3_errcode(mem.handle()), "sqlite3_backup_init(...)", __FILE__, __LINE__);
  const int rc = sqlite3_backup_step(b, -1);
  sqlite3_backup_finish(b);
  if (rc != SQLITE_DONE) throw_sqlite_error(src, rc, "sqlite3_backup_step(b, -1)", __FILE__, __LINE__);
  mem.exec("PRAGMA foreign_keys = ON");
  int from = s.user_version;
  if (s.user_version < latest_schema_version()) from = migrate(mem, migrations(), latest_schema_version());
  return KnowledgeBase(std::move(mem), false, from);
}

KnowledgeBase KnowledgeBase::in_memory() {
  Database mem(":memory:", Database::Mode::read_write_create, 0);
  migrate(mem, migrations(), latest_schema_version());
  return KnowledgeBase(std::move(mem), true, 0);
}

KnowledgeBase::KnowledgeBase(KnowledgeBase&& o) noexcept
    : db_(std::move(o.db_)),
      created_(o.created_),
      migrated_from_(o.migrated_from_),
      state_index_(std::move(o.state_index_)) {
  o.statements_.clear();  // they point at the moved-from Database object
}

KnowledgeBase& KnowledgeBase::operator=(KnowledgeBase&& o) noexcept {
  if (this != &o) {
    statements_.clear();
    o.statements_.clear();
    db_ = std::move(o.db_);
    created_ = o.created_;
    migrated_from_ = o.migrated_from_;
    state_index_ = std::move(o.state_index_);
  }
  return *this;
}

KnowledgeBase::~KnowledgeBase() { statements_.clear(); }

int KnowledgeBase::schema_version() const { return read_schema_state(db_).user_version; }

Statement& KnowledgeBase::cached(const char* sql) {
  auto& slot = statements_[sql];
  if (!slot) slot = std::make_unique<Statement>(db_, sql);
  slot->reset();
  return *slot;
}

int64_t KnowledgeBase::provenance_row(const Provenance& p) {
  if (p.kind != "seed" && p.kind != "learned")
    throw UserError(fmt::format("provenance kind must be 'seed' or 'learned', got '{}'", p.kind));
  auto& ins = cached("INSERT INTO provenance (kind, source) VALUES (?, ?) ON CONFLICT (kind, source) DO NOTHING");
  ins.bind_all(p.kind, p.source).run();
  auto& sel = cached("SELECT id FROM provenance WHERE kind = ? AND source = ?");
  sel.bind_all(p.kind, p.source);
  if (!sel.step()) throw Error("provenance row vanished after insert");
  const int64_t id = sel.get_int(0);
  sel.reset();
  return id;
}

// ---- writes ---------------------------------------------------------------------------------

std::string KnowledgeBase::add_target(const TargetRecord& t) {
  if (t.name.empty() || t.backend.empty()) throw UserError("a target needs a name and a backend");
  return write_transaction(db_, [&] {
    const int64_t prov = provenance_row(t.provenance);
    cached(
        "INSERT INTO targets (name, backend, arch, spec, provenance_id, created_at) VALUES (?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (name) DO NOTHING")
        .bind_all(t.name, t.backend, t.arch.empty() ? std::string("generic") : t.arch, t.spec.dump(), prov,
                  t.created_at.empty() ? utc_now_iso() : t.created_at)
        .run();
    return t.name;
  });
}

std::string KnowledgeBase::add_problem(const ProblemRecord& p) {
  if (p.name.empty()) throw UserError("a problem needs a name");
  const std::string id = !p.id.empty() ? p.id : hash_text("problem\n" + p.name + "\n" + p.spec.dump());
  return write_transaction(db_, [&] {
    const int64_t prov = provenance_row(p.provenance);
    cached(
        "INSERT INTO problems (id, name, op_class, spec, provenance_id, created_at) VALUES (?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (id) DO NOTHING")
        .bind_all(id, p.name, p.op_class, p.spec.dump(), prov, p.created_at.empty() ? utc_now_iso() : p.created_at)
        .run();
    return id;
  });
}

std::string KnowledgeBase::add_candidate(const CandidateRecord& c) {
  const std::string id = hash_text(c.source);
  if (!c.id.empty() && c.id != id)
    throw UserError(fmt::format("candidate id {} is not the content hash of its source ({})", c.id, id));
  if (c.backend.empty()) throw UserError("a candidate needs a backend");
  return write_transaction(db_, [&] {
    const int64_t prov = provenance_row(c.provenance);
    cached(
        "INSERT INTO candidates (id, backend, problem_id, source, provenance_id, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (id) DO NOTHING")
        .bind_all(id, c.backend)
        .bind_or_null(3, c.problem_id)
        .bind(4, c.source)
        .bind(5, prov)
        .bind(6, c.created_at.empty() ? utc_now_iso() : c.created_at)
        .run();
    return id;
  });
}

std::string KnowledgeBase::add_run(const RunRecord& r) {
  const std::string id = r.id.empty() ? random_id() : r.id;
  return write_transaction(db_, [&] {
    const int64_t prov = provenance_row(r.provenance);
    std::string log_id;
    if (!r.build_log.empty()) {
      log_id = hash_text(r.build_log);
      cached("INSERT INTO build_logs (id, text) VALUES (?, ?) ON CONFLICT (id) DO NOTHING")
          .bind_all(log_id, r.build_log)
          .run();
    }
    cached(
        "INSERT INTO runs (id, candidate_id, problem_id, target, correct, failure_kind, median_s, spread_pct, "
        "bandwidth_fraction, compute_fraction, build_log_id, result, provenance_id, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING")
        .bind_all(id, r.candidate_id)
        .bind_or_null(3, r.problem_id)
        .bind(4, r.target)
        .bind(5, r.correct)
        .bind_or_null(6, r.failure_kind)
        .bind(7, r.median_s)
        .bind(8, r.spread_pct)
        .bind(9, r.bandwidth_fraction)
        .bind(10, r.compute_fraction)
        .bind_or_null(11, log_id)
        .bind(12, r.result.dump())
        .bind(13, prov)
        .bind(14, r.created_at.empty() ? utc_now_iso() : r.created_at)
        .run();
    return id;
  });
}

std::string KnowledgeBase::add_state(const StateRecord& s) {
  if (s.signature.backend.empty()) throw UserError("a state needs a backend");
  const std::string id = s.id.empty() ? random_id() : s.id;
  const auto& g = s.signature;
  std::optional<double> log_ai;
  if (g.arithmetic_intensity && *g.arithmetic_intensity > 0) log_ai = std::log10(*g.arithmetic_intensity);
  return write_transaction(db_, [&] {
    const int64_t prov = provenance_row(s.provenance);
    cached(
        "INSERT INTO states (id, target, backend, arch, op_class, log10_intensity, bandwidth_fraction, "
        "compute_fraction, utilisation, bottleneck, cluster, problem_id, candidate_id, run_id, text, provenance_id, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING")
        .bind(1, id)
        .bind_or_null(2, g.target)
        .bind(3, g.backend)
        .bind(4, g.arch)
        .bind(5, g.op_class)
        .bind(6, log_ai)
        .bind(7, g.bandwidth_fraction)
        .bind(8, g.compute_fraction)
        .bind(9, g.utilisation)
        .bind(10, g.bottleneck)
        .bind(11, g.cluster())
        .bind_or_null(12, s.problem_id)
        .bind_or_null(13, s.candidate_id)
        .bind_or_null(14, s.run_id)
        .bind(15, s.text)
        .bind(16, prov)
        .bind(17, s.created_at.empty() ? utc_now_iso() : s.created_at)
        .run();
    return id;
  });
}

std::string KnowledgeBase::add_action(const ActionRecord& a) {
  if (a.id.empty() || a.title.empty()) throw UserError("an action needs an id and a title");
  if (a.backends.empty()) throw UserError(fmt::format("action {} names no backend", a.id));
  return write_transaction(db_, [&] {
    const int64_t prov = provenance_row(a.provenance);
    const int inserted =
        cached(
            "INSERT INTO actions (id, title, summary, when_helps, when_hurts, parameters, applies_to, "
            "prior_log_speedup, source, provenance_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (id) DO NOTHING")
            .bind_all(a.id, a.title, a.summary, a.when_helps, a.when_hurts, a.parameters.dump(), a.applies_to.dump(),
                      a.prior_log_speedup, a.source, prov, a.created_at.empty() ? utc_now_iso() : a.created_at)
            .run();
    for (const auto& b : a.backends)
      cached("INSERT INTO action_backends (action_id, backend) VALUES (?, ?) ON CONFLICT DO NOTHING")
          .bind_all(a.id, b)
          .run();
    if (!inserted) {
      // Known action: a changed text becomes a new version, the old one stays.
      const std::pair<const char*, const std::string*> fields[] = {
          {"title", &a.title}, {"summary", &a.summary}, {"when_helps", &a.when_helps}, {"when_hurts", &a.when_hurts}};
      for (const auto& [field, body] : fields)
        if (current_text("action", a.id, field) != *body)
          add_text_version("action", a.id, field, *body, a.provenance.source, a.provenance);
    }
    return a.id;
  });
}

std::string KnowledgeBase::add_constraint(const ConstraintRecord& c, const std::string& evidence_experience_id) {
  validate_predicate(c.predicate);
  if (c.effect != "demote" && c.effect != "exclude")
    throw UserError(fmt::format("constraint effect must be 'demote' or 'exclude', got '{}'", c.effect));
  if (c.text.empty()) throw UserError("a constraint needs a text");
  const std::string id = c.id.empty() ? constraint_id(c.action_id, c.predicate, c.effect) : c.id;
  return write_transaction(db_, [&] {
    const int64_t prov = provenance_row(c.provenance);
    const int inserted =
        cached(
            "INSERT INTO constraints (id, action_id, backend, text, predicate, effect, provenance_id, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING")
            .bind(1, id)
            .bind_or_null(2, c.action_id)
            .bind(3, c.backend)
            .bind(4, c.text)
            .bind(5, c.predicate.dump())
            .bind(6, c.effect)
            .bind(7, prov)
            .bind(8, c.created_at.empty() ? utc_now_iso() : c.created_at)
            .run();
    if (!inserted && current_text("constraint", id, "text") != c.text)
      add_text_version("constraint", id, "text", c.text, c.provenance.source, c.provenance);
    if (!evidence_experience_id.empty())
      cached("INSERT INTO constraint_evidence (constraint_id, experience_id) VALUES (?, ?) ON CONFLICT DO NOTHING")
          .bind_all(id, evidence_experience_id)
          .run();
    return id;
  });
}

std::string KnowledgeBase::add_experience(const ExperienceRecord& e) {
  if (e.state_id.empty() || e.action_id.empty() || e.target.empty())
    throw UserError("an experience needs a state, an action and a target");
  if (e.speedup && !(*e.speedup > 0)) throw UserError(fmt::format("speedup must be > 0, got {}", *e.speedup));
  const std::string id = e.id.empty() ? random_id() : e.id;
  std::optional<double> log_speedup;
  if (e.correct && e.speedup) log_speedup = std::log(*e.speedup);
  return write_transaction(db_, [&] {
    const int64_t prov = provenance_row(e.provenance);
    const int inserted =
        cached(
            "INSERT INTO experiences (id, state_id, action_id, problem_id, target, parent_candidate_id, "
            "candidate_id, run_id, after_state_id, correct, failure_kind, speedup, log_speedup, critic_text, model, "
            "prompt_hash, provenance_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (id) DO NOTHING")
            .bind_all(id, e.state_id, e.action_id)
            .bind_or_null(4, e.problem_id)
            .bind(5, e.target)
            .bind_or_null(6, e.parent_candidate_id)
            .bind_or_null(7, e.candidate_id)
            .bind_or_null(8, e.run_id)
            .bind_or_null(9, e.after_state_id)
            .bind(10, e.correct)
            .bind_or_null(11, e.failure_kind)
            .bind(12, e.speedup)
            .bind(13, log_speedup)
            .bind(14, e.critic_text)
            .bind(15, e.model)
            .bind(16, e.prompt_hash)
            .bind(17, prov)
            .bind(18, e.created_at.empty() ? utc_now_iso() : e.created_at)
            .run();
    if (inserted && !e.correct && (e.failure_kind == "build_failed" || e.failure_kind == "abi_error")) {
      auto& q = cached("SELECT backend FROM targets WHERE name = ?");
      q.bind(1, e.target);
      const std::string backend = q.step() ? q.get_text(0) : std::string();
      q.reset();
      ConstraintRecord c;
      c.action_id = e.action_id;
      c.backend = backend;
      c.predicate = {{"target", e.target}};
      c.effect = "demote";
      c.text = fmt::format("{} did not build on target {} ({})", e.action_id, e.target, e.failure_kind);
      c.provenance = e.provenance;
      add_constraint(c, id);
    }
    return id;
  });
}

std::string KnowledgeBase::add_text_version(const std::string& kind, const std::string& subject_id,
                                            const std::string& field, const std::string& body,
                                            const std::string& author, const Provenance& provenance) {
  if (!valid_subject_field(kind, field))
    throw UserError(fmt::format("'{}' is not a versioned text field of a {}", field, kind));
  return write_transaction(db_, [&] {
    {
      Statement exists(db_, base_text_sql(kind, field));
      exists.bind(1, subject_id);
      if (!exists.step()) throw UserError(fmt::format("no {} with id '{}'", kind, subject_id));
    }
    // Parent: the current head (newest version without a child), if any.
    std::string parent;
    int version = 1;
    auto& head = cached(
        "SELECT v.id, v.version FROM text_versions v WHERE v.subject_kind = ? AND v.subject_id = ? AND v.field = ? "
        "AND NOT EXISTS (SELECT 1 FROM text_versions c WHERE c.parent_id = v.id) "
        "ORDER BY v.created_at DESC, v.id DESC LIMIT 1");
    head.bind_all(kind, subject_id, field);
    if (head.step()) {
      parent = head.get_text(0);
      version = static_cast<int>(head.get_int(1)) + 1;
    }
    head.reset();
    const std::string id = text_version_id(kind, subject_id, field, parent, body);
    const int64_t prov = provenance_row(provenance);
    cached(
        "INSERT INTO text_versions (id, subject_kind, subject_id, field, parent_id, version, body, author, "
        "provenance_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING")
        .bind_all(id, kind, subject_id, field)
        .bind_or_null(5, parent)
        .bind(6, version)
        .bind(7, body)
        .bind(8, author)
        .bind(9, prov)
        .bind(10, utc_now_iso())
        .run();
    return id;
  });
}

// ---- reads ----------------------------------------------------------------------------------

std::string KnowledgeBase::current_text(const std::string& kind, const std::string& subject_id,
                                        const std::string& field) {
  if (!valid_subject_field(kind, field)) throw UserError(fmt::format("'{}' is not a text field of a {}", field, kind));
  auto& head = cached(
      "SELECT v.body FROM text_versions v WHERE v.subject_kind = ? AND v.subject_id = ? AND v.field = ? "
      "AND NOT EXISTS (SELECT 1 FROM text_versions c WHERE c.parent_id = v.id) "
      "ORDER BY v.created_at DESC, v.id DESC LIMIT 1");
  head.bind_all(kind, subject_id, field);
  if (head.step()) {
    std::string body = head.get_text(0);
    head.reset();
    return body;
  }
  head.reset();
  Statement base(db_, base_text_sql(kind, field));
  base.bind(1, subject_id);
  return base.step() ? base.get_text(0) : std::string();
}

namespace {
TextVersion read_text_version(const Statement& st) {
  TextVersion v;
  v.id = st.get_text(0);
  v.subject_kind = st.get_text(1);
  v.subject_id = st.get_text(2);
  v.field = st.get_text(3);
  v.parent_id = st.get_text(4);
  v.version = static_cast<int>(st.get_int(5));
  v.body = st.get_text(6);
  v.author = st.get_text(7);
  v.provenance = {st.get_text(8), st.get_text(9)};
  v.created_at = st.get_text(10);
  return v;
}
constexpr const char* kTextVersionColumns =
    "v.id, v.subject_kind, v.subject_id, v.field, v.parent_id, v.version, v.body, v.author, p.kind, p.source, "
    "v.created_at FROM text_versions v JOIN provenance p ON p.id = v.provenance_id ";
}  // namespace

std::vector<TextVersion> KnowledgeBase::text_versions(const std::string& kind, const std::string& subject_id) {
  Statement st(db_,
               std::string("SELECT ") + kTextVersionColumns +
                   "WHERE v.subject_kind = ? AND v.subject_id = ? ORDER BY v.field, v.version, v.created_at, v.id");
  st.bind_all(kind, subject_id);
  std::vector<TextVersion> out;
  while (st.step()) out.push_back(read_text_version(st));
  return out;
}

std::map<std::string, std::vector<TextVersion>> KnowledgeBase::text_conflicts(const std::string& kind,
                                                                              const std::string& subject_id) {
  Statement st(db_, std::string("SELECT ") + kTextVersionColumns +
                        "WHERE v.subject_kind = ? AND v.subject_id = ? "
                        "AND NOT EXISTS (SELECT 1 FROM text_versions c WHERE c.parent_id = v.id) "
                        "ORDER BY v.field, v.created_at, v.id");
  st.bind_all(kind, subject_id);
  std::map<std::string, std::vector<TextVersion>> heads;
  while (st.step()) {
    TextVersion v = read_text_version(st);
    heads[v.field].push_back(std::move(v));
  }
  std::erase_if(heads, [](const auto& kv) { return kv.second.size() < 2; });
  return heads;
}

std::optional<ActionRecord> KnowledgeBase::action(const std::string& id) {
  Statement st(db_,
               "SELECT a.id, a.parameters, a.applies_to, a.prior_log_speedup, a.source, p.kind, p.source, a.created_at "
               "FROM actions a JOIN provenance p ON p.id = a.provenance_id WHERE a.id = ?");
  st.bind(1, id);
  if (!st.step()) return std::nullopt;
  ActionRecord a;
  a.id = st.get_text(0);
  a.parameters = json::parse(st.get_text(1));
  a.applies_to = json::parse(st.get_text(2));
  a.prior_log_speedup = st.get_opt_double(3);
  a.source = st.get_text(4);
  a.provenance = {st.get_text(5), st.get_text(6)};
  a.created_at = st.get_text(7);
  a.title = current_text("action", id, "title");
  a.summary = current_text("action", id, "summary");
  a.when_helps = current_text("action", id, "when_helps");
  a.when_hurts = current_text("action", id, "when_hurts");
  Statement b(db_, "SELECT backend FROM action_backends WHERE action_id = ? ORDER BY backend");
  b.bind(1, id);
  while (b.step()) a.backends.push_back(b.get_text(0));
  return a;
}

std::optional<StateRecord> KnowledgeBase::state(const std::string& id) {
  Statement st(
      db_,
      "SELECT s.target, s.backend, s.arch, s.op_class, s.log10_intensity, s.bandwidth_fraction, "
      "s.compute_fraction, s.utilisation, s.bottleneck, s.problem_id, s.candidate_id, s.run_id, "
      "p.kind, p.source, s.created_at FROM states s JOIN provenance p ON p.id = s.provenance_id WHERE s.id = ?");
  st.bind(1, id);
  if (!st.step()) return std::nullopt;
  StateRecord s;
  s.id = id;
  s.signature.target = st.get_text(0);
  s.signature.backend = st.get_text(1);
  s.signature.arch = st.get_text(2);
  s.signature.op_class = st.get_text(3);
  if (auto l = st.get_opt_double(4)) s.signature.arithmetic_intensity = std::pow(10.0, *l);
  s.signature.bandwidth_fraction = st.get_opt_double(5);
  s.signature.compute_fraction = st.get_opt_double(6);
  s.signature.utilisation = st.get_opt_double(7);
  s.signature.bottleneck = st.get_text(8);
  s.problem_id = st.get_text(9);
  s.candidate_id = st.get_text(10);
  s.run_id = st.get_text(11);
  s.provenance = {st.get_text(12), st.get_text(13)};
  s.created_at = st.get_text(14);
  s.text = current_text("state", id, "text");
  return s;
}

std::vector<ConstraintRecord> KnowledgeBase::constraints_of(const std::string& action_id) {
  Statement st(db_,
               "SELECT c.id, c.action_id, c.backend, c.predicate, c.effect, p.kind, p.source, c.created_at "
               "FROM constraints c JOIN provenance p ON p.id = c.provenance_id WHERE c.action_id = ? ORDER BY c.id");
  st.bind(1, action_id);
  std::vector<ConstraintRecord> out;
  while (st.step()) {
    ConstraintRecord c;
    c.id = st.get_text(0);
    c.action_id = st.get_text(1);
    c.backend = st.get_text(2);
    c.predicate = json::parse(st.get_text(3));
    c.effect = st.get_text(4);
    c.provenance = {st.get_text(5), st.get_text(6)};
    c.created_at = st.get_text(7);
    out.push_back(std::move(c));
  }
  for (auto& c : out) c.text = current_text("constraint", c.id, "text");
  return out;
}

// ---- maintenance ----------------------------------------------------------------------------

void KnowledgeBase::rebuild_policy_stats() {
  retry_on_conflict(db_, [&] {
    Transaction tx(db_);
    db_.exec("DELETE FROM policy_stats");
    db_.exec(
        "INSERT INTO policy_stats (cluster, action_id, target_family, tries, correct, wins, sum_log_speedup, "
        "sum_sq_log_speedup, best_speedup) "
        "SELECT s.cluster, e.action_id, t.backend || ':' || t.arch, count(*), sum(e.correct), "
        "sum(CASE WHEN e.correct = 1 AND e.speedup > 1.02 THEN 1 ELSE 0 END), "
        "coalesce(sum(coalesce(e.log_speedup, 0.0)), 0.0), "
        "coalesce(sum(coalesce(e.log_speedup * e.log_speedup, 0.0)), 0.0), "
        "max(CASE WHEN e.correct = 1 THEN e.speedup END) "
        "FROM experiences e JOIN states s ON s.id = e.state_id JOIN targets t ON t.name = e.target "
        "GROUP BY 1, 2, 3");
    tx.commit();
  });
}

std::string KnowledgeBase::integrity_check() {
  if (db_.is_postgresql()) {
    // The server keeps its own pages consistent; what mblast can check is its derived table:
    // policy statistics that disagree with the experiences they count.
    const int64_t bad = db_.query_int(
        "SELECT count(*) FROM (SELECT s.cluster, e.action_id, t.backend || ':' || t.arch AS family, count(*) AS n "
        "FROM experiences e JOIN states s ON s.id = e.state_id JOIN targets t ON t.name = e.target "
        "GROUP BY 1, 2, 3) x FULL JOIN policy_stats p ON p.cluster = x.cluster AND p.action_id = x.action_id "
        "AND p.target_family = x.family WHERE p.tries IS DISTINCT FROM x.n");
    return bad == 0 ? std::string("ok")
                    : fmt::format("{} policy_stats rows disagree with the experiences they count", bad);
  }
  Statement st(db_, "PRAGMA quick_check");
  return st.step() ? st.get_text(0) : std::string("no answer from quick_check");
}

}  // namespace mblast::kb
