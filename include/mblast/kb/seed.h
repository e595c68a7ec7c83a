// Seed knowledge: actions (and the constraints that come with them) curated by the mblast
// authors with sources, stored as JSON Lines in kb_schema/seed/*.jsonl and compiled into the
// binary. Every row it writes has provenance 'seed' and the entry's source.
//
// One line per action (the format is in docs/knowledge-base.md "Seed knowledge"):
//   {"id": "cuda.vectorized-global-access", "backends": ["cuda"], "title": "...",
//    "summary": "...", "when_helps": "...", "when_hurts": "...", "source": "...",
//    "parameters": {...}, "applies_to": {"op_classes": [...], "bottlenecks": [...], "archs": [...]},
//    "prior_log_speedup": 0.1, "constraints": [{"text": "...", "predicate": {...}, "effect": "exclude"}]}
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "mblast/kb/records.h"

namespace mblast::kb {

class KnowledgeBase;

struct SeedEntry {
  ActionRecord action;
  std::vector<ConstraintRecord> constraints;
};

// Parses one seed file. Throws UserError "NAME:LINE: reason" for malformed JSON, a missing or
// unknown field, an unknown backend, an id that does not start with "<backend>." or a bad
// constraint predicate.
std::vector<SeedEntry> parse_seed(std::string_view name, std::string_view content);

// The seed compiled into this binary (kb_schema/seed/*.jsonl), ids checked unique.
std::vector<SeedEntry> embedded_seed();
// The seed of a folder of *.jsonl files (for curators editing kb_schema/seed without rebuilding).
std::vector<SeedEntry> seed_from_dir(const std::filesystem::path& dir);

struct SeedReport {
  int actions_added = 0, actions_known = 0, constraints_added = 0, text_versions_added = 0;
  int actions_repaired = 0;  // known ids that were not seed rows (a run made them): seed priors attached
  std::map<std::string, int> actions_per_backend;  // in the seed loaded
};

// Loads entries into the KB in one transaction. Idempotent: known actions stay; a changed seed
// text becomes a new text version (never an overwrite). A known id whose row is not a seed row
// (a run created it before the seed was there) gets the seed's priors, parameters, applies_to
// and provenance, and the seed's texts as new versions.
SeedReport load_seed(KnowledgeBase& kb, const std::vector<SeedEntry>& entries);

}  // namespace mblast::kb
