// The in-memory copy of every state's signature that retrieval scans (see
// KnowledgeBase::nearest_states). Private to src/kb.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mblast/kb/knowledge_base.h"

namespace mblast::kb {

struct KnowledgeBase::StateIndex {
  struct Row {
    std::string id, target, backend, arch, op_class, bottleneck;
    std::optional<double> log10_intensity, bandwidth_fraction, compute_fraction, utilisation;
  };
  std::vector<Row> rows;
  int64_t max_rowid = 0;
  bool stale = false;
};

}  // namespace mblast::kb
