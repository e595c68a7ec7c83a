// Counts for `mblast kb stats`: per backend, seed and learned apart.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace mblast::kb {

class KnowledgeBase;

struct OriginCounts {
  int64_t seed = 0, learned = 0;
};

struct KbSummary {
  std::string path;
  int schema_version = 0;
  uint64_t bytes = 0;  // the file and its -wal
  // backend -> "actions" | "states" | "experiences" | "constraints" -> counts. An action that
  // applies to several backends counts under each; experiences count under their target's
  // backend. Every backend with a seed file appears, even with zero rows.
  std::map<std::string, std::map<std::string, OriginCounts>> per_backend;
  // targets, problems, candidates, build_logs, runs, text_versions, policy_stats, actions (distinct)
  std::map<std::string, int64_t> totals;
};

KbSummary summarize_kb(KnowledgeBase& kb);
nlohmann::json to_json(const KbSummary& s);

}  // namespace mblast::kb
