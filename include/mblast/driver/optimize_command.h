// `mblast optimize` (the AC-TGD loop from the command line) and `mblast runs list|show`.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "mblast/loop/optimizer.h"

namespace CLI {
class App;
}

namespace mblast {

struct OptimizeArgs {
  std::string input, target = "pocl-cpu", start, policy = "auto", llm, kb, out, resume, spec, runner;
  bool json = false, replay = false, no_cache = false, no_confirm = false;
  bool quiet = false;        // no progress on stderr (the live line, the loop's notes)
  bool show_prompt = false;  // measure the start, print the first actor prompt, ask no LLM
  double llm_timeout = 0;
  int max_llm_calls = 0;
  long long max_tokens = 0;
  double max_usd = 0;
  loop::OptimizeOptions options;
};

void add_optimize(CLI::App& app, OptimizeArgs& a);
int run_optimize(const OptimizeArgs& a);

struct RunsArgs {
  std::string run;
  bool json = false;
};

void add_runs(CLI::App& app, RunsArgs& a);

// Whether the builtin policy has a generated kernel for the problem on the target (its plan is
// supported and the target's generator makes at least one variant).
bool builtin_generates(const Problem& problem, const Target& target);
// Why the builtin policy generates nothing for the problem on the target (its planner's reason).
std::string builtin_plan_note(const Problem& problem, const Target& target);

// The builtin policy on one problem, from `start` (nullopt: the first generated kernel), as
// `mblast optimize --policy builtin` runs it. Returns optimize()'s result. For `mblast bench
// --optimize`.
nlohmann::json optimize_with_builtin(const Problem& problem, const Target& target,
                                     const std::optional<std::filesystem::path>& start,
                                     const loop::OptimizeOptions& options);
// The same with an LLM as actor and critic (`llm_spec` as --llm takes it), the builtin policy as
// its fallback when it repeats itself; the result's "spend" is the LLM's.
nlohmann::json optimize_with_llm(const Problem& problem, const Target& target,
                                 const std::optional<std::filesystem::path>& start,
                                 const loop::OptimizeOptions& options, const std::string& llm_spec);
int run_runs(CLI::App& app, const RunsArgs& a);

}  // namespace mblast
