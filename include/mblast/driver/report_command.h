// `mblast report INPUT... --html OUT.html`: one self-contained HTML page (plots and the tables behind
// them) from optimize runs, bench results and optimize-model plans, side by side (docs/report.md).
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace mblast {

struct ReportArgs {
  std::vector<std::string> inputs;
  std::string html, kb;
  bool json = false;
};

void add_report(CLI::App& app, ReportArgs& a);
// Reads every input first (bad input: UserError, nothing written), then writes the page through a
// temporary file renamed over OUT.
int run_report(const ReportArgs& a);

}  // namespace mblast
