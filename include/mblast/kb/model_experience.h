// Model-level experiences (issue 40): what `mblast optimize-model` decided for a model and its
// fusion groups, and how each decision came out (kb_schema/migrations/0003_model_experiences.sql).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mblast/kb/knowledge_base.h"

namespace mblast::kb {

// Stores one row per group (its decision: group-loop or keep-generic, its share, its outcome)
// and one end-to-end row, from optimize-model's plan.json object, in one transaction.
// Returns the number of rows written.
int record_model_experience(KnowledgeBase& kb, const nlohmann::json& result);

// The stored rows, newest first: `where` matches the target name or family ("" : any),
// `op_class` the group's op class ("" : any); at most `limit` rows (0: all).
std::vector<nlohmann::json> model_experiences(KnowledgeBase& kb, const std::string& where, const std::string& op_class,
                                              int limit);

}  // namespace mblast::kb
