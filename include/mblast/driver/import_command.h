// `mblast import kernelbench FILE_OR_DIR --out DIR`: KernelBench-format PyTorch files become
// problem directories (through tools/mblast_kernelbench.py; docs/kernelbench.md).
// `mblast import sol-execbench DIR --out DIR`: SOL-ExecBench problems, one problem per workload,
// through the same helper and the same import (docs/sol-execbench.md).
#pragma once

#include <cstdint>
#include <string>

namespace CLI {
class App;
}

namespace mblast {

struct ImportArgs {
  std::string source, out, python, device = "cpu";
  std::string max_bytes;    // "" = the file's own sizes; else N bytes (64M, 1G): parse_byte_size
  std::string sol_anchors;  // sol-execbench: JSON {workload uuid: {"sol_latency_ms": x}}
  bool sol = false;         // the sol-execbench subcommand was given
  int seeds = 3, inits = 2;
  bool json = false;
  double timeout_s = 3600;
};

// "64M", "1G", "16MiB", "500k", "1048576" -> bytes (binary units); UserError naming OPTION otherwise.
uint64_t parse_byte_size(const std::string& text, const std::string& option);
// 16777216 -> "16M", as the Python helper prints it.
std::string format_byte_size(uint64_t n);

void add_import(CLI::App& app, ImportArgs& a);
int run_import(const ImportArgs& a);

}  // namespace mblast
