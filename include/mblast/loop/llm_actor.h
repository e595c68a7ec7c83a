// The LLM as actor and critic (prompts/*.md; docs/optimize.md "With an LLM").
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "mblast/kb/knowledge_base.h"
#include "mblast/llm/client.h"
#include "mblast/loop/actor.h"
#include "mblast/loop/critic.h"
#include "mblast/loop/prompts.h"

namespace mblast::loop {

class LlmActor : public Actor {
 public:
  // `progress`: print one line per unusable answer on stderr.
  LlmActor(llm::Client& client, bool progress = true);
  std::string name() const override;
  std::vector<Proposal> propose(const ActorContext& ctx) override;
  std::optional<Proposal> repair(const ActorContext& ctx, const Proposal& failed, const std::string& log) override;
  nlohmann::json spend() const override;
  nlohmann::json learn(kb::KnowledgeBase& kb, const Problem& problem, const Target& target,
                       const std::vector<nlohmann::json>& events) override;
  // Proposes in the LLM's place for samples it answered twice with a candidate already evaluated
  // (the second time told which): the builtin policy, whose next untried variants then run.
  void set_fallback(std::unique_ptr<Actor> fallback) { fallback_ = std::move(fallback); }

 private:
  std::string analysis(const ActorContext& ctx);
  llm::Client& client_;
  bool progress_;
  std::string analysed_id_, analysis_text_;
  std::unique_ptr<Actor> fallback_;
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

// Prints nothing and asks nothing: renders the actor prompt the first step would send (for
// `mblast optimize --show-prompt`) and proposes nothing, which ends the run.
class PromptPreview : public Actor {
 public:
  std::string name() const override { return "show-prompt"; }
  std::vector<Proposal> propose(const ActorContext& ctx) override;
  const std::string& prompt() const { return prompt_; }

 private:
  std::string prompt_;
};

// The text blocks the prompts are built from (shared with tests). Each section is cut to its
// token budget when the prompt is rendered (section_budget_tokens).
std::string problem_text(const Problem& p);
std::string target_text(const Target& t);
// The KB's ranked actions with their expected speedups.
std::string knowledge_text(const ActorContext& ctx, size_t max_actions = 8);
// The learned rules of those actions: when they help and hurt, with their evidence.
std::string rules_text(const ActorContext& ctx, size_t max_actions = 8);
// The constraints that apply to them here (and why an excluded one is excluded).
std::string constraints_text(const ActorContext& ctx);
// The nearest earlier states with the action taken there and its measured outcome.
std::string memory_text(const ActorContext& ctx, size_t max_items = 12);
// The best earlier kernels of the nearest problems, code included, within their budget.
std::string past_kernels_text(const ActorContext& ctx);
// What the runner measured about the device: compute units, vector width, memory, peaks.
std::string target_facts_text(const ActorContext& ctx);
// One measurement in a line: cost, spread, fractions of peak (or why it is not correct).
std::string measured_text(const Measured& m);
// A line diff of two sources ('-' before, '+' after, `context` unchanged lines around each change).
std::string line_diff(const std::string& before, const std::string& after, int context = 2);
// Every memory section of the actor prompt, by placeholder name.
std::map<std::string, std::string> memory_sections(const ActorContext& ctx);
std::string feedback_text(const ActorContext& ctx);
// The critic prompt for one comparison: `rules` is the rule-based critique of it (its figures).
RenderedPrompt critic_prompt(const CriticInput& in, const Critique& rules, int step);
// The actor prompt for one sample, rewriting `parent`.
RenderedPrompt actor_prompt(const ActorContext& ctx, const Known& parent, int sample, const std::string& analysis,
                            const std::string& feedback, const std::map<std::string, std::string>& memory);

}  // namespace mblast::loop
