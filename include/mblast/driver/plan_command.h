// `mblast plan`: what the builtin policy recognises in a problem, and how many candidates its
// generators make for a target — before any time is spent optimizing.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace mblast {

struct PlanArgs {
  std::vector<std::string> problems;
  std::string target;
  bool json = false;
  std::string write_dir;  // --write-variants: each generated variant's source under DIR/<problem>/
  bool pipeline = false;  // --pipeline: only the lowering pipeline's candidate (src/lower), whatever the plan
  // A KernelBench-format .py file is traced at a size that fits this many bytes (one seed, one
  // init) in a temporary folder, without its full-size data.
  std::string max_bytes = "16M";
  std::string python;
  double timeout_s = 600;
};

void add_plan(CLI::App& app, PlanArgs& a);
int run_plan(const PlanArgs& a);

}  // namespace mblast
