// `mblast optimize`: the AC-TGD loop (DESIGN.md "The loop").
//
// measure and classify the start -> retrieve from the KB -> the actor proposes k candidates
// -> the runner builds, verifies and times each -> the critic writes the textual gradient ->
// the KB records candidate, run, state, experience (statistics follow) and constraints ->
// continue from the best so far (a beam) -> stop on a budget, at a speed-of-light fraction,
// or after steps without gain. A candidate that is wrong, or not faster beyond noise, is never
// returned: the result is then the start, and says so.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mblast/loop/actor.h"
#include "mblast/loop/critic.h"
#include "mblast/measure/evaluate.h"

namespace mblast::loop {

struct Budget {
  int max_evals = 24;  // candidate evaluations (the start and the confirmation excluded)
  int max_steps = 8;
  double max_wall_s = 1800;
  int patience = 3;           // steps in a row without a gain before stopping
  double sol_fraction = 0.9;  // stop when the best reaches this fraction of peak (timed targets)
};

struct OptimizeOptions {
  std::filesystem::path kb_path;   // empty: kb::default_kb_path()
  std::filesystem::path runs_dir;  // empty: runs_root()
  std::filesystem::path out_dir;   // where the best candidate and the reports are copied ("" : none)
  Budget budget;
  int samples = 4;  // proposals per step
  int beam = 2;     // candidates kept to continue from
  uint64_t seed = 0;
  bool confirm = true;  // re-time start and best back to back before claiming a speedup
  bool quiet = false;   // no progress on stderr
  EvalOptions eval;
  std::string resume;  // run id to continue
};

struct OptimizeInput {
  Problem problem;
  Target target;
  std::filesystem::path start;  // the starting candidate file
  std::string problem_source;   // what the user gave (problem dir, KernelBench file, kernel + spec)
  // When the start is a generated kernel (not the user's): the next generated kernels, tried in
  // order as the start when the one before is not correct on the target. Each rejected one is
  // recorded in the KB as a failed run.
  std::vector<std::filesystem::path> fallback_starts;
};

// $MBLAST_RUNS_DIR, else $XDG_DATA_HOME/mblast/runs, else ~/.local/share/mblast/runs.
std::filesystem::path runs_root();

// Runs (or resumes) an optimization. Returns the final result object (see docs/optimize.md):
// correct, speedup, candidate, run, start/best cost, stop reason, spend, report paths.
// Candidate failures are data; infrastructure failures throw Error; bad input UserError.
nlohmann::json optimize(const OptimizeInput& in, Actor& actor, Critic& critic, const OptimizeOptions& o);

}  // namespace mblast::loop
