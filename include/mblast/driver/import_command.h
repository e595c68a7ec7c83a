// `mblast import kernelbench FILE_OR_DIR --out DIR`: KernelBench-format PyTorch files become
// problem directories (through tools/mblast_kernelbench.py; docs/kernelbench.md).
#pragma once

#include <cstdint>
#include <string>

namespace CLI {
class App;
}

namespace mblast {

struct ImportArgs {
  std::string source, out, python, device = "cpu";
  std::string max_bytes;  // "" = the file's own sizes; else N bytes (64M, 1G): parse_byte_size
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
