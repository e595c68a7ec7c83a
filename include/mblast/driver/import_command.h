// `mblast import kernelbench FILE_OR_DIR --out DIR`: KernelBench-format PyTorch files become
// problem directories (through tools/mblast_kernelbench.py; docs/kernelbench.md).
#pragma once

#include <string>

namespace CLI { class App; }

namespace mblast {

struct ImportArgs {
  std::string source, out, python, device = "cpu";
  int seeds = 3, inits = 2;
  bool json = false;
  double timeout_s = 3600;
};

void add_import(CLI::App& app, ImportArgs& a);
int run_import(const ImportArgs& a);

}  // namespace mblast
