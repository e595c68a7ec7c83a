// `mblast targets`: every target, whether it can be used from here, and why not.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace CLI {
class App;
}

namespace mblast {

struct Target;

struct TargetsArgs {
  bool json = false;
  bool no_probe = false;
  std::string measure_peaks;  // a target's name: measure its peaks again (and keep them)
};

void add_targets(CLI::App& app, TargetsArgs& a);
int run_targets(const TargetsArgs& a);

// Measures the target's peaks (bandwidth, FP32) again through its runner, which keeps them for
// later evaluations in place of the cached ones. Returns the runner's "peaks" message; throws
// UserError with the runner's reason when they could not be measured.
nlohmann::json measure_target_peaks(const Target& t);

}  // namespace mblast
