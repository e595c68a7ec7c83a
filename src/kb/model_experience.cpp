// Model-level experiences (include/mblast/kb/model_experience.h).
#include "mblast/kb/model_experience.h"

#include <cmath>

#include "mblast/kb/database.h"
#include "mblast/kb/records.h"

namespace mblast::kb {

using nlohmann::json;

namespace {

std::string text(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

std::optional<double> positive(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return std::nullopt;
  const double v = j[key].get<double>();
  if (!std::isfinite(v) || v <= 0) return std::nullopt;
  return v;
}

}  // namespace

int record_model_experience(KnowledgeBase& kb, const json& r) {
  const std::string model = text(r["model"], "name"), target = text(r["target"], "name");
  const std::string family = text(r["target"], "family");
  const std::string now = utc_now_iso();
  Transaction tx(kb.db());
  Statement st(
      kb.db(),
      "INSERT INTO model_experiences (id, model, target, target_family, decision, group_name, op_class, ops, share, "
      "evaluations, correct, speedup, outcome, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  int n = 0;
  auto put = [&](const std::string& decision, const std::string& group, const std::string& op_class,
                 const std::string& ops, std::optional<double> share, int evals, bool correct,
                 std::optional<double> speedup, const std::string& outcome) {
    st.reset();
    st.bind_all(random_id(), model, target, family, decision, group, op_class, ops);
    st.bind(9, share);
    st.bind(10, evals);
    st.bind(11, correct);
    st.bind(12, speedup);
    st.bind(13, outcome);
    st.bind(14, now);
    st.run();
    ++n;
  };
  for (const auto& g : r.value("groups", json::array())) {
    std::string ops;
    for (const auto& o : g.value("ops", json::array())) ops += (ops.empty() ? "" : ",") + o.get<std::string>();
    const bool looped = g.contains("loop");
    const json loop = g.value("loop", json::object());
    std::optional<double> speedup;
    if (auto b = positive(g, "before"), a = positive(g, "after"); b && a) speedup = *b / *a;
    put(looped ? "group-loop" : "keep-generic", text(g, "name"), text(g, "kind"), ops,
        g.contains("share") && g["share"].is_number() ? std::optional<double>(g["share"].get<double>()) : std::nullopt,
        loop.value("evaluations", 0), g.contains("before") && g["before"].is_number(), speedup, text(g, "outcome"));
  }
  const json e = r.value("end_to_end", json::object());
  const json loop = e.value("loop", json::object());
  std::string outcome = e.value("correct", false) ? "verified end to end" : "not verified: " + text(e, "reason");
  if (e.contains("speedup_vs_eager")) outcome += "; speedup over eager recorded";
  put("end-to-end", "", "model", "", std::nullopt, loop.value("evaluations", 0), e.value("correct", false),
      positive(e, "speedup_vs_eager"), outcome);
  tx.commit();
  return n;
}

std::vector<json> model_experiences(KnowledgeBase& kb, const std::string& where, const std::string& op_class,
                                    int limit) {
  Statement st(
      kb.db(),
      "SELECT model, target, target_family, decision, group_name, op_class, ops, share, evaluations, correct, speedup, "
      "outcome, created_at FROM model_experiences WHERE (? = '' OR target = ? OR target_family = ?) AND "
      "(? = '' OR op_class = ?) ORDER BY created_at DESC, id");
  st.bind_all(where, where, where, op_class, op_class);
  std::vector<json> out;
  while (st.step()) {
    if (limit > 0 && static_cast<int>(out.size()) >= limit) break;
    json j = {{"model", st.get_text(0)},    {"target", st.get_text(1)},     {"target_family", st.get_text(2)},
              {"decision", st.get_text(3)}, {"group", st.get_text(4)},      {"op_class", st.get_text(5)},
              {"ops", st.get_text(6)},      {"evaluations", st.get_int(8)}, {"correct", st.get_int(9) != 0},
              {"outcome", st.get_text(11)}, {"created_at", st.get_text(12)}};
    j["share"] = st.is_null(7) ? json(nullptr) : json(st.get_double(7));
    j["speedup"] = st.is_null(10) ? json(nullptr) : json(st.get_double(10));
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace mblast::kb
