// The rows of the knowledge base as C++ values: what the loop writes and retrieval reads.
// Empty strings stand for NULL in optional references; an empty id or created_at is filled in
// when the record is added (content hash or a random 128-bit id; the current UTC time).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mblast/kb/signature.h"

namespace mblast {
struct Target;
}

namespace mblast::kb {

// Where a row came from. kind "seed": curated by the mblast authors, source = guide, paper or
// measurement. kind "learned": written by a run of mblast, source = what produced it
// ("mblast 0.1.0 loop", "critic claude-...", "import of team-b.jsonl").
struct Provenance {
  std::string kind = "learned";
  std::string source;

  bool operator==(const Provenance&) const = default;
};

struct TargetRecord {
  std::string name, backend, arch;  // arch: see arch_of_target_spec()
  nlohmann::json spec = nlohmann::json::object();
  Provenance provenance;
  std::string created_at;
};

struct ProblemRecord {
  std::string id;  // empty: content hash of spec (or of the name when spec is empty)
  std::string name, op_class;
  nlohmann::json spec = nlohmann::json::object();
  Provenance provenance;
  std::string created_at;
};

struct CandidateRecord {
  std::string id;  // always content_hash_hex(source); a given id must match
  std::string backend, problem_id, source;
  Provenance provenance;
  std::string created_at;
};

struct RunRecord {
  std::string id;
  std::string candidate_id, problem_id, target;
  bool correct = false;
  std::string failure_kind;  // protocol FailureKind name; "" when correct
  std::optional<double> median_s, spread_pct, bandwidth_fraction, compute_fraction;
  std::string build_log;  // stored once per distinct text (build_logs)
  nlohmann::json result = nlohmann::json::object();
  Provenance provenance;
  std::string created_at;
};

struct StateRecord {
  std::string id;
  StateSignature signature;  // signature.target, when set, must name a known target
  std::string problem_id, candidate_id, run_id;
  std::string text;
  Provenance provenance;
  std::string created_at;
};

struct ActionRecord {
  std::string id;  // "cuda.wgmma-async-mma": backend prefix, then a slug
  std::string title, summary, when_helps, when_hurts;
  std::vector<std::string> backends;                     // cuda, opencl, rvv
  nlohmann::json parameters = nlohmann::json::object();  // name -> description or choices
  // Tags the prior uses: {"op_classes": [...], "bottlenecks": [...], "archs": [prefixes]}.
  nlohmann::json applies_to = nlohmann::json::object();
  std::optional<double> prior_log_speedup;  // expected ln(speedup) before any evidence
  std::string source;                       // where the knowledge comes from (guide, paper)
  Provenance provenance;
  std::string created_at;
};

struct ExperienceRecord {
  std::string id;
  std::string state_id, action_id, problem_id, target;
  std::string parent_candidate_id, candidate_id, run_id, after_state_id;
  bool correct = false;
  std::string failure_kind;        // "" when correct
  std::optional<double> speedup;   // parent time / new time, when both were timed
  std::string critic_text;         // the textual gradient
  std::string model, prompt_hash;  // who proposed it, from which prompt
  Provenance provenance;
  std::string created_at;
};

// The predicate is a JSON object whose keys must all match the query (docs/knowledge-base.md):
// backend, target, arch, arch_not (strings or lists), sm_below / sm_at_least (CUDA sm number),
// vlen_below (RVV), arch_lacks (substring absent from arch), op_class, bottleneck.
struct ConstraintRecord {
  std::string id;  // empty: content hash of (action_id, canonical predicate, effect)
  std::string action_id;
  std::string backend;
  std::string text;
  nlohmann::json predicate = nlohmann::json::object();
  std::string effect = "demote";  // demote | exclude
  Provenance provenance;
  std::string created_at;
};

struct TextVersion {
  std::string id;
  std::string subject_kind, subject_id, field;
  std::string parent_id;
  int version = 1;
  std::string body, author;
  Provenance provenance;
  std::string created_at;
};

// The target row for a target description (targets/*.json), provenance learned.
TargetRecord target_record(const Target& t);

// Throws UserError naming the first problem (unknown key, bad type, empty predicate value).
void validate_predicate(const nlohmann::json& predicate);

// Does the predicate hold for this signature? Keys that need a field the signature lacks do not
// match (an unknown arch never excludes an action).
bool predicate_matches(const nlohmann::json& predicate, const StateSignature& s);

// The content-addressed ids.
std::string constraint_id(const std::string& action_id, const nlohmann::json& predicate, const std::string& effect);
std::string text_version_id(const std::string& subject_kind, const std::string& subject_id, const std::string& field,
                            const std::string& parent_id, const std::string& body);
std::string random_id();    // 32 hex digits from getrandom (fork-safe)
std::string utc_now_iso();  // 2025-01-31T12:34:56.789Z

}  // namespace mblast::kb
