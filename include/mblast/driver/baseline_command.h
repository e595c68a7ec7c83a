// `mblast baseline PROBLEM --target T`: PyTorch eager and torch.compile timed on the target's
// device by the runner's rules (tools/mblast_kernelbench.py baseline), stored in
// PROBLEM/baselines.json under the target's name (docs/kernelbench.md "Baselines").
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "mblast/target.h"

namespace CLI {
class App;
}

namespace mblast {

struct BaselineArgs {
  std::string problem, target = "pocl-cpu", python;
  bool json = false, no_compile = false;
  int warmup = 5, repeats = 50;
  double min_seconds = 0.5, timeout_s = 1800;
};

void add_baseline(CLI::App& app, BaselineArgs& a);
int run_baseline(const BaselineArgs& a);

// The torch device that measures PyTorch on this target ("cpu" or "cuda"), or "" with *why
// set to a one-line reason when PyTorch cannot run there.
std::string baseline_device(const Target& t, std::string* why);

// Adds or replaces entry[target] in DIR/baselines.json under a lock, atomically, keeping every
// other target's entry. Throws Error when the file cannot be written.
void store_baseline(const std::string& problem_dir, const std::string& target, const nlohmann::json& entry);

}  // namespace mblast
