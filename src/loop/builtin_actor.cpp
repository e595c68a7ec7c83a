// The builtin policy's actor (include/mblast/loop/builtin_actor.h).
#include "mblast/loop/builtin_actor.h"

#include <algorithm>
#include <cmath>
#include <span>

#include <fmt/format.h>

#include "mblast/loop/tunables.h"
#include "mblast/tensor.h"

namespace mblast::loop {

namespace {

// How many parameters differ between two variants of one family.
int param_distance(const nlohmann::json& a, const nlohmann::json& b) {
  int d = 0;
  for (auto it = a.begin(); it != a.end(); ++it)
    if (!b.contains(it.key()) || b[it.key()] != it.value()) ++d;
  for (auto it = b.begin(); it != b.end(); ++it)
    if (!a.contains(it.key())) ++d;
  return d;
}

// A small deterministic jitter from the seed, to break ties differently per seed: under 1e-4,
// the score of one place in the generators' order, so that it can swap neighbours but not
// overrule that order. (Up to 1e-3 it shuffled a fresh KB's first ten proposals: a 3-evaluation
// softmax bench row missed the generator's first designs, and a resnet chain its all-FFT one.)
double jitter(uint64_t seed, size_t i) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + 1;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return static_cast<double>(x % 1000) / 1e7;
}

}  // namespace

BuiltinActor::BuiltinActor(std::vector<policy::Variant> variants, uint64_t seed)
    : variants_(std::move(variants)), seed_(seed) {
  for (const auto& v : variants_) ids_.push_back(content_hash_hex(v.source));
}

double BuiltinActor::score(size_t i, const ActorContext& ctx, const std::map<std::string, double>& action_value) const {
  const auto& v = variants_[i];
  // What the KB expects of the variant's actions in this state (posterior mean ln speedup).
  double prior = -0.2;  // an action the KB does not rank here
  if (!v.actions.empty()) {
    if (auto it = action_value.find(v.actions[0]); it != action_value.end()) prior = it->second;
    double extra = 0;
    int n = 0;
    for (size_t a = 1; a < v.actions.size(); ++a)
      if (auto it = action_value.find(v.actions[a]); it != action_value.end()) extra += it->second, ++n;
    if (n) prior += 0.3 * extra / n;
  }
  // What this run has seen of the family: exploit families that won, drop those that fail.
  double family = 0;
  int tries = 0, failures = 0;
  double best_gain = -INFINITY;
  if (ctx.history && ctx.start)
    for (const auto& h : *ctx.history) {
      if (h.family != v.family) continue;
      ++tries;
      if (!h.measured.correct)
        ++failures;
      else
        best_gain = std::max(best_gain, std::log(ctx.start->measured.cost / h.measured.cost));
    }
  if (tries >= 2 && failures == tries)
    family = -2;  // this family does not work here
  else if (std::isfinite(best_gain))
    family = 0.5 * best_gain;
  // Within a family, what each of the variant's parameter values did in this run: the best
  // gain among the measured variants sharing that value (a value not yet measured counts as
  // the family's best, so it is explored). Tunables such as LMUL and unrolling act fairly
  // independently, so m8 after "m8 did well at another unroll" beats m2 after "m2 did badly".
  double values = 0;
  if (std::isfinite(best_gain) && v.params.is_object() && !v.params.empty() && ctx.history && ctx.start) {
    double sum = 0;
    for (auto it = v.params.begin(); it != v.params.end(); ++it) {
      double best = -INFINITY;
      for (const auto& h : *ctx.history)
        if (h.family == v.family && h.measured.correct && h.params.is_object() && h.params.contains(it.key()) &&
            h.params[it.key()] == it.value())
          best = std::max(best, std::log(ctx.start->measured.cost / h.measured.cost));
      sum += std::isfinite(best) ? best : best_gain;
    }
    values = 0.5 * (sum / static_cast<double>(v.params.size()) - best_gain);
  }
  // What won in the nearest known states (other problems, other targets): the same family
  // and parameters most, the same family a little. Weighted by how near the state is.
  double past = 0;
  for (const auto& w : ctx.past_winners) {
    if (w.family != v.family) continue;
    double gain = std::log(std::max(w.speedup, 1.0)) * w.weight;
    past = std::max(past, param_distance(w.params, v.params) == 0 ? 0.6 * gain : 0.1 * gain);
  }
  // Search near the best so far: its family, one or two parameters changed.
  double local = 0;
  if (!ctx.beam.empty() && ctx.beam[0]->family == v.family) {
    int d = param_distance(ctx.beam[0]->params, v.params);
    local = d <= 1 ? 0.15 : d == 2 ? 0.05 : 0;
  }
  return prior + family + values + past + local + jitter(seed_, i) - 1e-4 * static_cast<double>(i);
}

// Families this run has measured at least twice whose best is more than 1.5x behind the run's
// best: they lose their guaranteed share of a step, which goes to the leaders' untried variants
// (they still fill a step by score). Without this, a step of 4 between two families spent 2
// evaluations on work-group softmaxes at 1.2-1.3x while work-item ones were at 6.7x (pocl-cpu).
std::set<std::string> BuiltinActor::lagging_families(const ActorContext& ctx) {
  std::set<std::string> out;
  if (!ctx.history || !ctx.start) return out;
  std::map<std::string, std::pair<int, double>> seen;  // family -> (tries, best ln speedup)
  double run_best = 0;                                 // the start
  for (const auto& h : *ctx.history) {
    auto& [tries, best] = seen.try_emplace(h.family, 0, -INFINITY).first->second;
    ++tries;
    if (!h.measured.correct) continue;
    best = std::max(best, std::log(ctx.start->measured.cost / h.measured.cost));
    run_best = std::max(run_best, best);
  }
  for (const auto& [family, tb] : seen)
    if (tb.first >= 2 && tb.second < run_best - std::log(1.5)) out.insert(family);
  return out;
}

std::vector<Proposal> BuiltinActor::propose(const ActorContext& ctx) {
  std::map<std::string, double> action_value;
  std::set<std::string> excluded;
  for (const auto& r : ctx.ranked) {
    if (r.excluded)
      excluded.insert(r.id);
    else
      action_value[r.id] = r.mean_log_speedup;
  }
  std::vector<std::pair<double, size_t>> order;
  for (size_t i = 0; i < variants_.size(); ++i) {
    if (ctx.tried.count(ids_[i])) continue;
    if (!variants_[i].actions.empty() && excluded.count(variants_[i].actions[0])) continue;
    order.emplace_back(score(i, ctx, action_value), i);
  }
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  // At most half of a step from one family, so one step explores more than one technique.
  const size_t per_family = std::max(1, (ctx.k + 1) / 2);
  const std::set<std::string> lagging = lagging_families(ctx);
  std::map<std::string, size_t> taken;
  std::vector<size_t> chosen, skipped;
  for (const auto& [s, i] : order) {
    if (taken[variants_[i].family] >= per_family || lagging.count(variants_[i].family))
      skipped.push_back(i);
    else if (static_cast<int>(chosen.size()) < ctx.k)
      chosen.push_back(i), ++taken[variants_[i].family];
  }
  for (size_t i : skipped)  // fill up when few families are left
    if (static_cast<int>(chosen.size()) < ctx.k) chosen.push_back(i);
  std::vector<Proposal> out;
  for (size_t i : chosen) {
    const auto& v = variants_[i];
    Proposal p;
    p.source = v.source;
    p.extension = v.extension;
    p.actions = v.actions;
    p.family = v.family;
    p.params = v.params;
    p.description = v.description;
    p.parent_id = ctx.beam.empty() ? "" : ctx.beam[0]->id;
    p.model = "builtin";
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<policy::Variant> builtin_variants(const Problem& problem, const Target& target,
                                              const policy::KernelPlan& plan, const std::string& start_source,
                                              const std::string& extension, std::string* note) {
  std::vector<policy::Variant> all = policy::generate_variants(plan, problem, target);
  size_t generated = all.size();
  auto tuned = tunable_variants(start_source, target.backend, extension);
  size_t tunables = tuned.size();
  for (auto& v : tuned) all.push_back(std::move(v));
  if (note) {
    std::string kernel = plan.kind == "unsupported" ? "no generator applies (" + plan.reason + ")" : plan.summary();
    *note = fmt::format("builtin policy: {}; {} generated variants, {} from the start's tunables", kernel, generated,
                        tunables);
  }
  return all;
}

}  // namespace mblast::loop
