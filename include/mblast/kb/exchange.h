// Moving knowledge between KBs: export to and import from JSON Lines, merge, diff.
//
// The JSON Lines format (docs/knowledge-base.md "Export format"): a header line, then one
// object per row with "kind" and the row's fields, in dependency order (target, problem,
// build_log, candidate, action, run, state, experience, constraint, constraint_evidence,
// text_version), each kind sorted by its key; object keys sorted; provenance written inline as
// {"kind": "seed"|"learned", "source": ...}. policy_stats are not exported: they are derived
// from experiences and rebuilt by the importing KB. Export -> import into an empty KB ->
// export gives the same lines.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace mblast::kb {

class KnowledgeBase;

inline constexpr int kExportFormatVersion = 1;

// Every row of the KB (one read snapshot), header first.
std::vector<nlohmann::json> export_records(KnowledgeBase& kb);
void write_jsonl(const std::vector<nlohmann::json>& records, std::ostream& out);
// Throws UserError "NAME:LINE: reason" for a line that is not a JSON object, and for a file
// without the header or of a newer format version.
std::vector<nlohmann::json> read_jsonl(std::istream& in, const std::string& name);

struct ImportReport {
  std::map<std::string, int> added;    // per kind: rows new to this KB
  std::map<std::string, int> present;  // per kind: rows it already had (same key)
  // Same key, different content, where the content is not the key: targets and actions. Ours
  // is kept; differing action texts are kept as well, as text versions (both survive).
  std::vector<std::string> conflicts;
  int texts_kept_as_versions = 0;

  int total_added() const;
};

// Adds every record the KB lacks, in one transaction: all or nothing. Rows are matched by key
// (content hash, random id or name), so importing the same file twice, or merging KBs that
// share history, adds nothing twice; policy statistics follow the experiences actually added.
// Throws UserError for a malformed record or one that refers to a row the file lacks.
ImportReport import_records(KnowledgeBase& kb, const std::vector<nlohmann::json>& records);

// Imports everything of the KB file `other` (read through an in-memory snapshot; the file is
// not changed) into `kb`.
ImportReport merge_from(KnowledgeBase& kb, const std::filesystem::path& other);

struct DiffReport {
  // kind -> keys
  std::map<std::string, std::vector<std::string>> only_here, only_there, different;
  bool empty() const { return only_here.empty() && only_there.empty() && different.empty(); }
};

// What `here` has that `there` has not, the reverse, and rows with one key and different
// content. created_at is ignored (two KBs seeded at different times hold the same seed).
DiffReport diff_records(const std::vector<nlohmann::json>& here, const std::vector<nlohmann::json>& there);

// Rows whose key is `id_or_prefix`, or starts with it (at least 4 characters), across every
// kind: (kind, key) pairs, exact matches only when there is one.
std::vector<std::pair<std::string, std::string>> find_records(KnowledgeBase& kb, const std::string& id_or_prefix);
// One row in the export format; nullopt when there is none.
std::optional<nlohmann::json> fetch_record(KnowledgeBase& kb, const std::string& kind, const std::string& key);

// The key of a record within its kind ("cuda.wgmma-async-mma", "<constraint>/<experience>").
std::string record_key(const nlohmann::json& record);

}  // namespace mblast::kb
