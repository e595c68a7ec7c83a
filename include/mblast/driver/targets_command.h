// `mblast targets`: every target, whether it can be used from here, and why not.
#pragma once

#include <string>

namespace CLI { class App; }

namespace mblast {

struct TargetsArgs {
  bool json = false;
  bool no_probe = false;
};

void add_targets(CLI::App& app, TargetsArgs& a);
int run_targets(const TargetsArgs& a);

}  // namespace mblast
