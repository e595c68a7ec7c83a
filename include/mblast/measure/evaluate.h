// `mblast eval`: is this candidate correct on this target, and how fast is it?
//
// The driver sends inputs and parameters (never expected outputs) to the runner, gets back the
// outputs of every verification run, checks them here against the reference by every rule in
// DESIGN.md "Measurement", and only then asks for timing — whose outputs are checked too.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "mblast/problem.h"
#include "mblast/target.h"

namespace mblast {

class RunnerClient;

struct EvalOptions {
  std::optional<RunnerAddress> runner;  // overrides the target's own runner address
  int runs = 2;                         // calls per seed x init (the second must agree)
  bool timing = true;
  int warmup = 3;
  int min_repeats = 20;
  int max_repeats = 1000;
  double min_seconds = 0.3;     // keep timing until this much timed work is collected
  int rotate = 0;               // rotating input/output buffer sets; 0: rotating_sets() decides
  double max_wall_seconds = 3;  // stop adding samples past min_repeats after this long (flushes included)
  int spot_checks = 3;          // timed calls (chosen after they ran) run again in a fresh process and compared
  double build_s = 180, run_s = 60, time_s = 300;
  int memory_mb = 0;   // 0: 4096 MiB plus four times the data of one request (full-size problems need it)
  bool quiet = false;  // no progress lines on stderr
};

// How many rotating buffer sets the timing stage uses: `requested` when positive, else the rule
// the PyTorch baselines follow (tools/kernelbench/baseline.py), so both sides are timed alike:
// one set per seed at least, up to 4 while the inputs of all sets stay within 4 GiB on a CUDA
// target, 1 GiB on others.
int rotating_sets(const Problem& problem, const Target& target, int requested);

// Evaluates one candidate file. Candidate failures come back in the result
// ("correct": false, "failure_kind", "reason"); infrastructure failures throw Error and bad
// input throws UserError. `client` reuses a running runner (nullptr: start one).
nlohmann::json evaluate(const Problem& problem, const Target& target, const std::filesystem::path& candidate,
                        const EvalOptions& options, RunnerClient* client = nullptr);

// Runs a candidate on every seed x init of a problem that has inputs and parameters but no
// expected outputs yet, twice each, and returns its outputs in `outputs` (keyed by seed, init):
// a user's own kernel becomes the reference this way. The result has "correct" (false when the
// candidate failed, left an output element unwritten or not finite, or two runs disagreed),
// "failure_kind" and "reason", as evaluate() gives them.
nlohmann::json capture_outputs(const Problem& problem, const Target& target, const std::filesystem::path& candidate,
                               const EvalOptions& options, std::map<std::pair<int, int>, TensorSet>& outputs);

// The human-readable rendering of an evaluate() result.
std::string format_eval_result(const nlohmann::json& r);

}  // namespace mblast
