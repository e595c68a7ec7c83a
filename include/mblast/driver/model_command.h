// `mblast optimize-model MODEL --target T` and `mblast run-model DIR --target T` (issue 40,
// docs/model.md): a whole model planned as fusion groups, each group timed, the hottest through
// the kernel loop, the result verified and timed end to end and written as a folder a user runs.
#pragma once

#include <string>
#include <vector>

#include "mblast/target.h"

namespace CLI {
class App;
}

namespace mblast {

struct OptimizeModelArgs {
  std::string model, target = "pocl-cpu", out, max_bytes, kb, python, runner;
  std::vector<std::string> input_shapes;  // name=1x3x224x224 (TorchScript input)
  std::vector<std::string> stitch;        // GROUP=FILE: the user's own candidate for a fusion group
  int evals = 8;
  int seeds = 3, inits = 2;
  bool json = false, no_baseline = false;
};

struct RunModelArgs {
  std::string dir, target, inputs, out, runner;
  bool json = false;
};

void add_optimize_model(CLI::App& app, OptimizeModelArgs& a);
int run_optimize_model(const OptimizeModelArgs& a);
void add_run_model(CLI::App& app, RunModelArgs& a);
int run_run_model(const RunModelArgs& a);

// A target name, or a family name ("opencl", "adreno", "cpu", "rvv", "cuda"), resolved to a
// target this machine can reach; `how` says which and why. Throws UserError (one line) when no
// target of the family can be reached here. With RUNNER_URL (--runner) the target is measured
// there: a name is taken as it is, a family by its first target, without asking this machine.
Target resolve_target_family(const std::string& name, std::string* how, const std::string& runner_url = "");

}  // namespace mblast
