// The builtin policy as an actor: no LLM. Its executable actions are the generators' variants
// for the problem's recognised kernel (include/mblast/policy/variants.h) and the start
// candidate's own tunables; it orders them by what the KB expects of their actions in this
// state, by what already worked in this run (search near the best), and proposes the most
// promising untried ones.
#pragma once

#include <map>
#include <set>
#include <string>

#include "mblast/loop/actor.h"
#include "mblast/policy/variants.h"

namespace mblast::loop {

class BuiltinActor : public Actor {
 public:
  // `variants`: everything it may propose (see builtin_variants()).
  explicit BuiltinActor(std::vector<policy::Variant> variants, uint64_t seed = 0);
  std::string name() const override { return "builtin"; }
  std::vector<Proposal> propose(const ActorContext& ctx) override;
  size_t variant_count() const { return variants_.size(); }

 private:
  double score(size_t i, const ActorContext& ctx, const std::map<std::string, double>& action_value) const;
  static std::set<std::string> lagging_families(const ActorContext& ctx);
  std::vector<policy::Variant> variants_;
  std::vector<std::string> ids_;  // content hash of each variant's source
  uint64_t seed_;
};

// The generated variants for the problem's plan on the target plus the start's tunables.
// `note` receives one line saying what was found (for the progress output and the report).
std::vector<policy::Variant> builtin_variants(const Problem& problem, const Target& target,
                                              const policy::KernelPlan& plan, const std::string& start_source,
                                              const std::string& extension, std::string* note);

}  // namespace mblast::loop
