// The knowledge base: mblast's mutable policy (DESIGN.md "Knowledge base"), one SQLite file.
//
// Opening a KB creates it when missing (file and folders) and migrates an older schema in one
// transaction; a newer schema, another application's database, a damaged, locked or
// unwritable file give a KbFileError (a UserError) naming the file and what to do. Every write
// is one transaction (or joins the caller's Transaction), so a failure or a kill -9 leaves the
// KB as it was before the write. Several processes may read and write one KB at once.
//
// Threading: one KnowledgeBase is one connection; use it from one thread at a time.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mblast/kb/database.h"
#include "mblast/kb/records.h"
#include "mblast/kb/retrieval.h"
#include "mblast/kb/signature.h"

namespace mblast::kb {

struct OpenOptions {
  bool read_only = false;    // never write: no creation, no migration
  int busy_timeout_ms = -1;  // how long to wait for another writer; -1: $MBLAST_KB_BUSY_TIMEOUT_MS, else 10000
  int target_version = 0;    // migrate to this version (0: the newest); tests make older files with it
  bool seed = true;          // a KB this open creates gets the built-in seed knowledge (kb_schema/seed)
};

// $MBLAST_KB, else $XDG_DATA_HOME/mblast/kb.sqlite, else ~/.local/share/mblast/kb.sqlite.
std::filesystem::path default_kb_path();

class KnowledgeBase {
 public:
  explicit KnowledgeBase(const std::filesystem::path& file, const OpenOptions& options = {});
  // A private in-memory copy of a KB file, migrated in memory: the file is only read.
  // For `kb diff` and `kb merge`, which must not change the other team's file.
  static KnowledgeBase snapshot_of(const std::filesystem::path& file);
  // An empty in-memory KB at the newest schema (tests, scratch work).
  static KnowledgeBase in_memory();

  KnowledgeBase(KnowledgeBase&&) noexcept;
  KnowledgeBase& operator=(KnowledgeBase&&) noexcept;
  ~KnowledgeBase();

  const std::filesystem::path& file() const { return db_.file(); }
  Database& db() { return db_; }
  int schema_version() const;
  bool created() const { return created_; }             // this open made the schema from nothing
  int migrated_from() const { return migrated_from_; }  // version found on open

  // ---- writes: each one transaction; ids are returned ----
  std::string add_target(const TargetRecord& t);  // an existing name is kept as it is
  std::string add_problem(const ProblemRecord& p);
  std::string add_candidate(const CandidateRecord& c);  // dedup by content hash
  std::string add_run(const RunRecord& r);
  std::string add_state(const StateRecord& s);
  // A new action, or, for an existing id whose text differs, new text versions of the changed
  // fields (authored by the record's provenance source); never an overwrite.
  std::string add_action(const ActionRecord& a);
  // A constraint (deduplicated by content), optionally with the experience that shows it.
  std::string add_constraint(const ConstraintRecord& c, const std::string& evidence_experience_id = "");
  // An experience; policy statistics follow (schema trigger). A build failure (failure_kind
  // build_failed or abi_error) adds or reinforces a learned 'demote' constraint for this action
  // on this target, with the experience as evidence.
  std::string add_experience(const ExperienceRecord& e);
  // A new version of a text field (action: title, summary, when_helps, when_hurts; state: text;
  // constraint: text), child of the current head. Returns its id; the same edit twice is one row.
  std::string add_text_version(const std::string& subject_kind, const std::string& subject_id, const std::string& field,
                               const std::string& body, const std::string& author, const Provenance& provenance);

  // ---- reads ----
  std::optional<ActionRecord> action(const std::string& id);  // texts are the current versions
  std::optional<StateRecord> state(const std::string& id);
  std::vector<ConstraintRecord> constraints_of(const std::string& action_id);
  // The current text of a field: the newest head of its versions, else the row's own column.
  std::string current_text(const std::string& subject_kind, const std::string& subject_id, const std::string& field);
  // Every version of a subject's fields, oldest first.
  std::vector<TextVersion> text_versions(const std::string& subject_kind, const std::string& subject_id);
  // Heads (versions without a child) per field, when a field has more than one (a merge kept both).
  std::map<std::string, std::vector<TextVersion>> text_conflicts(const std::string& subject_kind,
                                                                 const std::string& subject_id);

  // ---- retrieval (docs/knowledge-base.md "Retrieval") ----
  // The k states nearest to `s`, ordered by weight (similarity x transfer discount), heaviest first.
  // The signatures of all states are cached in memory per KnowledgeBase and refreshed from the
  // file on each call (new rows only; a full reload when rows disappeared).
  std::vector<NearestState> nearest_states(const StateSignature& s, int k, const RetrievalOptions& o = {});
  // Actions applicable to s.backend (all, when it is empty) ranked for the state `s`.
  std::vector<RankedAction> ranked_actions(const StateSignature& s, const RetrievalOptions& o = {});

  // The provenance row for p (found or added). Throws UserError for a kind other than
  // seed/learned.
  int64_t provenance_row(const Provenance& p);

  // ---- maintenance ----
  // Recomputes policy_stats from experiences (they are kept by a trigger; this checks or repairs).
  void rebuild_policy_stats();
  // "ok", or SQLite's first complaint (PRAGMA quick_check).
  std::string integrity_check();

 private:
  struct StateIndex;  // the in-memory copy of every state's signature (retrieval.cpp)

  KnowledgeBase(Database db, bool created, int migrated_from);
  Statement& cached(const char* sql);
  void refresh_state_index();

  Database db_;
  bool created_ = false;
  int migrated_from_ = 0;
  std::map<const char*, std::unique_ptr<Statement>> statements_;
  std::unique_ptr<StateIndex> state_index_;
};

}  // namespace mblast::kb
