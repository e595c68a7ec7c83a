// `mblast kb init | query | show | stats | export | import | merge | diff`: the knowledge base
// from the command line (docs/knowledge-base.md). Every subcommand takes --kb PATH (default
// $MBLAST_KB, else ~/.local/share/mblast/kb.sqlite, created on first use) and --json.
#pragma once

#include <optional>
#include <string>

namespace CLI {
class App;
}

namespace mblast {

struct KbArgs {
  std::string command;  // set by the parser: init, query, show, ...
  std::string kb;
  bool json = false;
  // init
  bool no_seed = false;
  std::string seed_dir;
  // query
  std::string target, backend, op_class, bottleneck, text;
  std::optional<double> intensity, bandwidth_fraction, compute_fraction, utilisation;
  int limit = 15;
  int k = 32;
  double transfer_discount = 0.5;
  bool include_excluded = false;
  std::string level = "kernel";  // kernel | model (optimize-model's decisions)
  // show
  std::string id;
  // export
  std::string out;
  // import, merge, diff
  std::string file;
};

void add_kb(CLI::App& app, KbArgs& a);
int run_kb(const KbArgs& a);

}  // namespace mblast
