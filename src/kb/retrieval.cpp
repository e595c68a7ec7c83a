// Retrieval: nearest states by signature distance, then actions ranked by a prior plus the
// similarity-weighted outcomes of the neighbours' experiences (docs/knowledge-base.md).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>

#include "mblast/kb/knowledge_base.h"
#include "signature_view.h"
#include "state_index.h"

namespace mblast::kb {

using nlohmann::json;

double RankedAction::expected_speedup() const { return std::exp(mean_log_speedup); }

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> w;
  std::istringstream in(lower(text));
  for (std::string s; in >> s;) w.push_back(s);
  return w;
}

bool contains_all(const std::string& haystack_lower, const std::vector<std::string>& words) {
  return std::all_of(words.begin(), words.end(),
                     [&](const std::string& w) { return haystack_lower.find(w) != std::string::npos; });
}

std::string in_list(size_t n) {
  std::string s = "(";
  for (size_t i = 0; i < n; ++i) s += i ? ",?" : "?";
  return s + ")";
}

bool list_has(const json& list, const std::string& v) {
  if (!list.is_array()) return false;
  for (const auto& e : list)
    if (e.is_string() && lower(e.get<std::string>()) == v) return true;
  return false;
}

bool list_has_prefix_of(const json& list, const std::string& v) {
  if (!list.is_array()) return false;
  for (const auto& e : list)
    if (e.is_string() && v.rfind(e.get<std::string>(), 0) == 0) return true;
  return false;
}

}  // namespace

// States are immutable and, being referenced by experiences, normally never deleted: new ones
// have larger rowids, so a refresh reads only those. Anything else (rows deleted by hand, a
// rolled-back insert seen earlier) makes the counts disagree and the index is rebuilt.
void KnowledgeBase::refresh_state_index() {
  if (!state_index_) state_index_ = std::make_unique<StateIndex>();
  StateIndex& ix = *state_index_;
  Statement cnt(db_, "SELECT count(*), coalesce(max(rowid), 0) FROM states");
  cnt.step();
  const int64_t count = cnt.get_int(0), max_rowid = cnt.get_int(1);
  if (ix.stale || max_rowid < ix.max_rowid || count < static_cast<int64_t>(ix.rows.size())) ix = StateIndex{};
  if (count == static_cast<int64_t>(ix.rows.size()) && max_rowid == ix.max_rowid) return;
  Statement st(db_,
               "SELECT rowid, id, coalesce(target, ''), backend, arch, op_class, bottleneck, log10_intensity, "
               "bandwidth_fraction, compute_fraction, utilisation FROM states WHERE rowid > ? ORDER BY rowid");
  st.bind(1, ix.max_rowid);
  while (st.step()) {
    ix.max_rowid = st.get_int(0);
    ix.rows.push_back({st.get_text(1), st.get_text(2), st.get_text(3), st.get_text(4), st.get_text(5), st.get_text(6),
                       st.get_opt_double(7), st.get_opt_double(8), st.get_opt_double(9), st.get_opt_double(10)});
  }
  if (static_cast<int64_t>(ix.rows.size()) != count) {  // rows vanished below max_rowid: start over
    ix = StateIndex{};
    ix.stale = false;
    refresh_state_index();
  }
}

std::vector<NearestState> KnowledgeBase::nearest_states(const StateSignature& q, int k, const RetrievalOptions& o) {
  std::vector<NearestState> out;
  if (k <= 0) return out;
  ReadSnapshot snapshot(db_);
  refresh_state_index();
  // Pass 1: score every state's signature (in memory), keeping the k heaviest in a heap.
  const SignatureView qv = view_of(q);
  const double temperature = o.temperature > 0 ? o.temperature : 1.0;
  struct Scored {
    double weight, distance;
    bool same_target;
    const std::string* id;
  };
  const auto lighter_first = [](const Scored& a, const Scored& b) {  // heap top: the one to drop next
    return a.weight != b.weight ? a.weight > b.weight : *a.id < *b.id;
  };
  std::vector<Scored> heap;
  heap.reserve(static_cast<size_t>(k) + 1);
  for (const auto& r : state_index_->rows) {
    if (o.same_backend_only && r.backend != q.backend) continue;
    const SignatureView v{
        r.backend,          r.arch,       r.op_class, r.bottleneck, r.log10_intensity, r.bandwidth_fraction,
        r.compute_fraction, r.utilisation};
    const double distance = view_distance(qv, v, o.weights);
    // "Same target": the query's target, or, for a query by arch, the same backend and arch.
    const bool same =
        !q.target.empty() ? r.target == q.target : !q.arch.empty() && r.backend == q.backend && r.arch == q.arch;
    double discount = 1.0;
    if (!same) {
      discount = o.transfer_discount;
      if (!iequals(r.backend, q.backend)) discount *= o.cross_backend_discount;
    }
    const Scored sc{std::exp(-distance / temperature) * discount, distance, same, &r.id};
    if (static_cast<int>(heap.size()) == k && !lighter_first(sc, heap.front())) continue;
    heap.push_back(sc);
    std::push_heap(heap.begin(), heap.end(), lighter_first);
    if (static_cast<int>(heap.size()) > k) {
      std::pop_heap(heap.begin(), heap.end(), lighter_first);
      heap.pop_back();
    }
  }
  std::sort_heap(heap.begin(), heap.end(), lighter_first);  // heaviest first
  if (heap.empty()) return out;

  // Pass 2: the full rows and experience counts of the chosen few.
  std::unordered_map<std::string, size_t> index;
  for (const auto& h : heap) {
    index[*h.id] = out.size();
    NearestState n;
    n.id = *h.id;
    n.distance = h.distance;
    n.weight = h.weight;
    n.same_target = h.same_target;
    out.push_back(std::move(n));
  }
  Statement rows(db_,
                 "SELECT id, coalesce(target, ''), backend, arch, op_class, log10_intensity, bandwidth_fraction, "
                 "compute_fraction, utilisation, bottleneck, "
                 "(SELECT count(*) FROM experiences e WHERE e.state_id = states.id) FROM states WHERE id IN " +
                     in_list(out.size()));
  for (size_t i = 0; i < out.size(); ++i) rows.bind(static_cast<int>(i + 1), out[i].id);
  while (rows.step()) {
    NearestState& n = out[index.at(rows.get_text(0))];
    StateSignature& s = n.signature;
    s.target = rows.get_text(1);
    s.backend = rows.get_text(2);
    s.arch = rows.get_text(3);
    s.op_class = rows.get_text(4);
    if (auto l = rows.get_opt_double(5)) s.arithmetic_intensity = std::pow(10.0, *l);
    s.bandwidth_fraction = rows.get_opt_double(6);
    s.compute_fraction = rows.get_opt_double(7);
    s.utilisation = rows.get_opt_double(8);
    s.bottleneck = rows.get_text(9);
    n.experiences = static_cast<int>(rows.get_int(10));
  }
  // A state the index knew but the file no longer has (an insert that was rolled back).
  const auto before = out.size();
  std::erase_if(out, [](const NearestState& n) { return n.signature.backend.empty(); });
  if (out.size() != before) state_index_->stale = true;
  for (auto& n : out) n.text = current_text("state", n.id, "text");
  return out;
}

std::vector<RankedAction> KnowledgeBase::ranked_actions(const StateSignature& q, const RetrievalOptions& o) {
  ReadSnapshot snapshot(db_);

  // 1. Candidate actions (those for the query's backend), with their current texts.
  std::map<std::string, RankedAction> actions;
  std::map<std::string, json> applies;
  std::map<std::string, std::optional<double>> priors;
  {
    Statement st(db_,
                 q.backend.empty()
                     ? "SELECT a.id, a.title, a.summary, a.when_helps, a.when_hurts, a.source, p.kind, a.applies_to, "
                       "a.prior_log_speedup FROM actions a JOIN provenance p ON p.id = a.provenance_id"
                     : "SELECT a.id, a.title, a.summary, a.when_helps, a.when_hurts, a.source, p.kind, a.applies_to, "
                       "a.prior_log_speedup FROM actions a JOIN provenance p ON p.id = a.provenance_id "
                       "WHERE EXISTS (SELECT 1 FROM action_backends b WHERE b.action_id = a.id AND b.backend = ?)");
    if (!q.backend.empty()) st.bind(1, q.backend);
    while (st.step()) {
      RankedAction r;
      r.id = st.get_text(0);
      r.title = st.get_text(1);
      r.summary = st.get_text(2);
      r.when_helps = st.get_text(3);
      r.when_hurts = st.get_text(4);
      r.source = st.get_text(5);
      r.provenance = st.get_text(6);
      applies[r.id] = json::parse(st.get_text(7), nullptr, false);
      priors[r.id] = st.get_opt_double(8);
      actions.emplace(r.id, std::move(r));
    }
    Statement heads(db_,
                    "SELECT v.subject_id, v.field, v.body FROM text_versions v WHERE v.subject_kind = 'action' "
                    "AND NOT EXISTS (SELECT 1 FROM text_versions c WHERE c.parent_id = v.id) "
                    "ORDER BY v.created_at, v.id");  // newest last: it wins
    while (heads.step()) {
      auto it = actions.find(heads.get_text(0));
      if (it == actions.end()) continue;
      const std::string field = heads.get_text(1);
      std::string body = heads.get_text(2);
      if (field == "title")
        it->second.title = std::move(body);
      else if (field == "summary")
        it->second.summary = std::move(body);
      else if (field == "when_helps")
        it->second.when_helps = std::move(body);
      else if (field == "when_hurts")
        it->second.when_hurts = std::move(body);
    }
    Statement b(db_, "SELECT action_id, backend FROM action_backends ORDER BY action_id, backend");
    while (b.step())
      if (auto it = actions.find(b.get_text(0)); it != actions.end()) it->second.backends.push_back(b.get_text(1));
  }

  // 2. Evidence: the experiences of the nearest states, weighted by their state's weight.
  const std::vector<NearestState> near = nearest_states(q, o.k, o);
  std::unordered_map<std::string, const NearestState*> by_state;
  for (const auto& n : near) by_state[n.id] = &n;
  std::map<std::string, double> evidence_sum;
  std::map<std::string, std::string> evidence_text;  // critic texts, for the text filter
  if (!near.empty()) {
    Statement ev(db_,
                 "SELECT id, state_id, action_id, target, correct, speedup, log_speedup, "
                 "coalesce(candidate_id, ''), critic_text FROM experiences WHERE state_id IN " +
                     in_list(near.size()));
    for (size_t i = 0; i < near.size(); ++i) ev.bind(static_cast<int>(i + 1), near[i].id);
    while (ev.step()) {
      auto it = actions.find(ev.get_text(2));
      if (it == actions.end()) continue;  // an action of another backend
      RankedAction& r = it->second;
      const NearestState& n = *by_state.at(ev.get_text(1));
      const bool correct = ev.get_int(4) != 0;
      const auto speedup = ev.get_opt_double(5);
      const double x = correct ? ev.get_opt_double(6).value_or(0.0) : o.failure_log_speedup;
      r.evidence_weight += n.weight;
      evidence_sum[r.id] += n.weight * x;
      ++r.tries;
      if (correct) ++r.correct;
      if (correct && speedup && *speedup > 1.02) ++r.wins;
      if (n.same_target)
        ++r.same_target_tries;
      else
        ++r.transferred_tries;
      if (correct && speedup && *speedup > 1.0 && !ev.get_text(7).empty())
        r.examples.push_back({ev.get_text(0), ev.get_text(7), ev.get_text(3), *speedup, n.same_target});
      if (!o.text.empty()) evidence_text[r.id] += " " + ev.get_text(8) + " " + n.text;
    }
  }

  // 3. Constraints that hold for the query, and the cluster statistics on this target family.
  struct Constraint {
    std::string id, text, effect, provenance;
    json predicate;
    int evidence = 0;
  };
  std::map<std::string, std::vector<Constraint>> constraints;
  {
    Statement st(db_,
                 "SELECT c.id, c.action_id, c.predicate, c.effect, p.kind, "
                 "(SELECT count(*) FROM constraint_evidence x WHERE x.constraint_id = c.id) "
                 "FROM constraints c JOIN provenance p ON p.id = c.provenance_id WHERE c.action_id IS NOT NULL");
    while (st.step()) {
      const std::string action_id = st.get_text(1);
      if (!actions.count(action_id)) continue;
      Constraint c{st.get_text(0),
                   "",
                   st.get_text(3),
                   st.get_text(4),
                   json::parse(st.get_text(2), nullptr, false),
                   static_cast<int>(st.get_int(5))};
      if (c.predicate.is_discarded() || !predicate_matches(c.predicate, q)) continue;
      constraints[action_id].push_back(std::move(c));
    }
    for (auto& [aid, list] : constraints)
      for (auto& c : list) c.text = current_text("constraint", c.id, "text");
  }
  std::map<std::string, ClusterStats> cluster;
  {
    Statement st(db_,
                 "SELECT action_id, tries, correct, wins, sum_log_speedup, best_speedup FROM policy_stats "
                 "WHERE cluster = ? AND target_family = ?");
    st.bind_all(q.cluster(), q.target_family());
    while (st.step()) {
      ClusterStats c;
      c.tries = static_cast<int>(st.get_int(1));
      c.correct = static_cast<int>(st.get_int(2));
      c.wins = static_cast<int>(st.get_int(3));
      c.mean_log_speedup = c.correct > 0 ? st.get_double(4) / c.correct : 0.0;
      c.best_speedup = st.get_opt_double(5);
      cluster[st.get_text(0)] = c;
    }
  }

  // 4. Score: posterior mean ln-speedup, minus constraint penalties, plus optional exploration.
  const std::vector<std::string> words = words_of(o.text);
  const std::string q_bottleneck = lower(q.bottleneck), q_op = lower(q.op_class);
  const std::string q_group = q_op.empty() ? std::string() : op_class_group(q_op);
  std::vector<RankedAction> out;
  for (auto& [id, r] : actions) {
    if (!words.empty()) {
      const std::string hay = lower(r.id + " " + r.title + " " + r.summary + " " + r.when_helps + " " + r.when_hurts +
                                    " " + evidence_text[id]);
      if (!contains_all(hay, words)) continue;
    }
    const json& tags = applies[id].is_object() ? applies[id] : json::object();
    double prior = priors[id].value_or(o.default_prior);
    if (!q_op.empty() && tags.contains("op_classes") && !tags["op_classes"].empty() &&
        !list_has(tags["op_classes"], q_op)) {
      bool same_group = list_has(tags["op_classes"], q_group);
      for (const auto& t : tags["op_classes"])
        if (t.is_string() && op_class_group(lower(t.get<std::string>())) == q_group) same_group = true;
      prior *= same_group ? o.op_group_factor : o.op_mismatch_factor;
    }
    if (!q_bottleneck.empty() && tags.contains("bottlenecks") && !tags["bottlenecks"].empty() &&
        !list_has(tags["bottlenecks"], q_bottleneck)) {
      const double f = o.bottleneck_mismatch_factor;
      prior *= q_bottleneck == "balanced" ? (1.0 + f) / 2 : f;
    }
    if (!q.arch.empty() && tags.contains("archs") && !tags["archs"].empty() &&
        !list_has_prefix_of(tags["archs"], q.arch))
      prior *= o.arch_mismatch_factor;
    r.prior_log_speedup = prior;
    r.mean_log_speedup = (o.prior_strength * prior + evidence_sum[id]) / (o.prior_strength + r.evidence_weight);
    r.score = r.mean_log_speedup;
    if (o.exploration > 0) r.score += o.exploration / std::sqrt(o.prior_strength + r.evidence_weight);

    for (const auto& c : constraints[id]) {
      ConstraintHit hit{c.id, c.text, c.effect, c.provenance, c.evidence};
      if (c.effect == "exclude") {
        r.excluded = true;
        r.excluded_reason = c.text;
      } else {
        r.score -= o.demote_penalty;
        if (c.provenance == "learned" && o.exclude_after_failures > 0 && c.evidence >= o.exclude_after_failures &&
            !q.target.empty()) {
          Statement ok(db_, "SELECT count(*) FROM experiences WHERE action_id = ? AND target = ? AND correct = 1");
          ok.bind_all(id, q.target);
          if (ok.step() && ok.get_int(0) == 0) {
            hit.effect = "exclude";
            r.excluded = true;
            r.excluded_reason = fmt::format("{} ({} failures, never correct on {})", c.text, c.evidence, q.target);
          }
        }
      }
      r.constraints.push_back(std::move(hit));
    }
    if (r.excluded && !o.include_excluded) continue;
    if (auto it = cluster.find(id); it != cluster.end()) r.cluster_stats = it->second;
    std::sort(r.examples.begin(), r.examples.end(), [](const ExampleCandidate& a, const ExampleCandidate& b) {
      if (a.same_target != b.same_target) return a.same_target;
      return a.speedup != b.speedup ? a.speedup > b.speedup : a.experience_id < b.experience_id;
    });
    // One example per candidate: the same code measured twice is one example.
    std::set<std::string> seen;
    std::erase_if(r.examples, [&](const ExampleCandidate& e) { return !seen.insert(e.candidate_id).second; });
    if (static_cast<int>(r.examples.size()) > o.examples)
      r.examples.resize(static_cast<size_t>(std::max(0, o.examples)));
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(), [](const RankedAction& a, const RankedAction& b) {
    if (a.excluded != b.excluded) return !a.excluded;
    return a.score != b.score ? a.score > b.score : a.id < b.id;
  });
  if (o.limit > 0 && static_cast<int>(out.size()) > o.limit) out.resize(static_cast<size_t>(o.limit));
  return out;
}

}  // namespace mblast::kb
