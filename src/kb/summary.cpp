#include "mblast/kb/summary.h"

#include <system_error>

#include "mblast/kb/knowledge_base.h"

namespace mblast::kb {

namespace fs = std::filesystem;
using nlohmann::json;

KbSummary summarize_kb(KnowledgeBase& kb) {
  ReadSnapshot snapshot(kb.db());
  KbSummary s;
  s.path = kb.file().string();
  s.schema_version = kb.schema_version();
  std::error_code ec;
  for (const std::string suffix : {"", "-wal"}) {
    const auto size = fs::file_size(kb.file().string() + suffix, ec);
    if (!ec) s.bytes += size;
  }
  for (const char* b : {"cuda", "opencl", "rvv"})
    for (const char* what : {"actions", "states", "experiences", "constraints"}) s.per_backend[b][what] = {};
  const std::pair<const char*, const char*> queries[] = {
      {"actions",
       "SELECT b.backend, p.kind, count(*) FROM action_backends b JOIN actions a ON a.id = b.action_id "
       "JOIN provenance p ON p.id = a.provenance_id GROUP BY 1, 2"},
      {"states",
       "SELECT s.backend, p.kind, count(*) FROM states s JOIN provenance p ON p.id = s.provenance_id "
       "GROUP BY 1, 2"},
      {"experiences",
       "SELECT t.backend, p.kind, count(*) FROM experiences e JOIN targets t ON t.name = e.target "
       "JOIN provenance p ON p.id = e.provenance_id GROUP BY 1, 2"},
      {"constraints",
       "SELECT c.backend, p.kind, count(*) FROM constraints c JOIN provenance p ON p.id = "
       "c.provenance_id GROUP BY 1, 2"},
  };
  for (const auto& [what, sql] : queries) {
    Statement st(kb.db(), sql);
    while (st.step()) {
      OriginCounts& c = s.per_backend[st.get_text(0)][what];
      (st.get_text(1) == "seed" ? c.seed : c.learned) += st.get_int(2);
    }
  }
  for (const char* table :
       {"targets", "problems", "candidates", "build_logs", "runs", "text_versions", "policy_stats", "actions"})
    s.totals[table] = kb.db().query_int(std::string("SELECT count(*) FROM ") + table);
  return s;
}

json to_json(const KbSummary& s) {
  json backends = json::object();
  for (const auto& [b, kinds] : s.per_backend)
    for (const auto& [what, c] : kinds) backends[b][what] = {{"seed", c.seed}, {"learned", c.learned}};
  return {{"path", s.path},
          {"schema_version", s.schema_version},
          {"bytes", s.bytes},
          {"backends", backends},
          {"totals", s.totals}};
}

}  // namespace mblast::kb
