// `mblast export CANDIDATE --problem P --format kernelbench`: a KernelBench submission
// (Model from the problem's model.py, ModelNew calling the candidate through load_inline),
// so the field's own evaluation can check our results (docs/kernelbench.md "Export").
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace mblast {

struct ExportArgs {
  std::string candidate, problem, format = "kernelbench", out, backend, python;
  bool json = false;
};

void add_export(CLI::App& app, ExportArgs& a);
int run_export(const ExportArgs& a);
// The work of run_export without its output: writes the KernelBench file, returns its path;
// throws UserError with one line (a candidate or problem it cannot export, the helper's failure).
std::string export_kernelbench(const ExportArgs& a);

// The backend a candidate file names: "<label>.<backend>.<ext>" -> backend, or "".
std::string candidate_backend(const std::string& filename);

}  // namespace mblast
