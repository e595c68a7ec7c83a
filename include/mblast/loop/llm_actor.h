// The LLM as actor and critic (prompts/*.md; docs/optimize.md "With an LLM").
#pragma once

#include <map>
#include <vector>

#include "mblast/kb/knowledge_base.h"
#include "mblast/llm/client.h"
#include "mblast/loop/actor.h"
#include "mblast/loop/critic.h"

namespace mblast::loop {

class LlmActor : public Actor {
 public:
  // `progress`: print one line per unusable answer on stderr.
  LlmActor(llm::Client& client, bool progress = true);
  std::string name() const override;
  std::vector<Proposal> propose(const ActorContext& ctx) override;
  std::optional<Proposal> repair(const ActorContext& ctx, const Proposal& failed, const std::string& log) override;
  nlohmann::json spend() const override;

 private:
  std::string analysis(const ActorContext& ctx);
  llm::Client& client_;
  bool progress_;
  std::string analysed_id_, analysis_text_;
};

// The critic with an LLM: the rule-based figures first, then the LLM's reading of them. An LLM
// failure leaves the rule-based text (and says so); a spent budget too.
class LlmCritic : public Critic {
 public:
  explicit LlmCritic(llm::Client& client) : client_(client) {}
  Critique critique(const CriticInput& in) override;

 private:
  llm::Client& client_;
  RuleCritic rules_;
  int calls_ = 0;
};

// After a run with an LLM: asks it what the run taught about the actions it used and stores
// the answer as new versions of the actions' when_helps / when_hurts texts (never overwriting).
// Returns how many text versions were written; LLM failures are reported, not thrown.
int llm_knowledge_update(llm::Client& client, kb::KnowledgeBase& kb, const Problem& problem, const Target& target,
                         const std::vector<nlohmann::json>& events, std::string* note);

// The text blocks the prompts are built from (shared with tests).
std::string problem_text(const Problem& p);
std::string target_text(const Target& t);
std::string knowledge_text(const ActorContext& ctx, size_t max_actions = 8, size_t max_states = 3);

}  // namespace mblast::loop
