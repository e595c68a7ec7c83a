#include "mblast/driver/import_command.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <regex>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "mblast/driver/kernelbench_tool.h"
#include "mblast/error.h"
#include "mblast/progress.h"

namespace mblast {

namespace fs = std::filesystem;

uint64_t parse_byte_size(const std::string& text, const std::string& option) {
  const std::regex re(R"(\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?\s*)");
  std::smatch m;
  if (!std::regex_match(text, m, re))
    throw UserError(option + ": '" + text + "' is not a size (a number of bytes, or with K, M, G, T: 64M, 1G)");
  const std::string unit = m[2].str();
  const auto power =
      unit.empty() ? std::string::npos : std::string("kmgt").find(static_cast<char>(std::tolower(unit[0])));
  const int shift = power == std::string::npos ? 0 : 10 * static_cast<int>(power + 1);
  const double v = std::stod(m[1].str()) * std::ldexp(1.0, shift);
  if (v < 1 || v > 9.0e18) throw UserError(option + ": '" + text + "' is not a positive size");
  return static_cast<uint64_t>(v);
}

std::string format_byte_size(uint64_t n) {
  for (auto [unit, shift] : {std::pair{"G", 30}, {"M", 20}, {"K", 10}}) {
    const uint64_t f = uint64_t{1} << shift;
    if (n >= f && n % f == 0) return std::to_string(n / f) + unit;
  }
  return std::to_string(n);
}

void add_import(CLI::App& app, ImportArgs& a) {
  auto* c = app.add_subcommand("import", "Turn models from other formats into mblast problems");
  c->require_subcommand(1);
  c->footer(
      "Run `mblast import kernelbench --help` for the KernelBench importer, `mblast import sol-execbench --help`\n"
      "for SOL-ExecBench's problems.");
  auto* kb = c->add_subcommand("kernelbench", "Import a KernelBench-format PyTorch file, or a directory of them");
  kb->footer(
      "Example:\n"
      "  mblast import kernelbench KernelBench/level1/19_ReLU.py --out problems/kb\n"
      "Each file (class Model, get_inputs(), get_init_inputs()) becomes DIR/<file stem>/ with\n"
      "problem.json, model.py, graph.json (when torch.fx/torch.export can trace it) and reference\n"
      "data for every seed x init, computed by the Model itself with the torch that --python has.\n"
      "A directory import goes on past a failing file and prints `imported N, failed M`.\n"
      "Exit status: 0 all imported, 1 some file failed, 2 bad input or no usable torch.");
  kb->add_option("source", a.source, "A KernelBench-format .py file or a directory of them")->required();
  kb->add_option("-o,--out", a.out, "Folder that receives one problem directory per file")->required();
  kb->add_option(
      "--python", a.python,
      "Python interpreter with torch and safetensors (default: $MBLAST_PYTHON, else mblast's .venv, else python3)");
  kb->add_option("--seeds", a.seeds, "Input seeds (the last one is the signed variant)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  kb->add_option("--inits", a.inits, "Parameter initialisations")->capture_default_str()->check(CLI::Range(1, 100));
  kb->add_option("--device", a.device, "Where the reference runs: cpu or cuda")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  kb->add_option("--max-bytes", a.max_bytes,
                 "Scale the file's size constants down until one seed's inputs, parameters and outputs fit in N bytes "
                 "(64M, 1G; docs/kernelbench.md \"Sizes that fit the target\")");
  kb->add_option("--timeout", a.timeout_s, "Seconds allowed for the whole import")->capture_default_str();
  kb->add_flag("--json", a.json, "Print a JSON summary: per file ok, problem dir, op class, graph, seconds or reason");

  auto* sol = c->add_subcommand("sol-execbench", "Import SOL-ExecBench problems: one mblast problem per workload");
  sol->footer(
      "Example:\n"
      "  mblast import sol-execbench SOL-ExecBench/data/benchmark/L1 --out problems/sol --sol-anchors sol.json\n"
      "DIR is a problem folder (definition.json, workload.jsonl; reference.py is not read) or a folder of them.\n"
      "Each workload becomes OUT/<definition>/<definition>_w<k>.py, a KernelBench-format file, and the\n"
      "problem imported from it next to it; `mblast bench OUT` runs them. SOL-ExecBench's data set has no\n"
      "speed-of-light times: give them with --sol-anchors (from its leaderboard, or your own); a workload's\n"
      "time there is kept as the problem's bound, and bench reports the fraction of it reached.\n"
      "See docs/sol-execbench.md.\n"
      "Exit status: 0 all imported, 1 some problem or workload failed, 2 bad input or no usable torch.");
  sol->add_option("source", a.source, "A SOL-ExecBench problem folder, or a folder of them")->required();
  sol->add_option("-o,--out", a.out, "Folder that receives one folder per definition")->required();
  sol->add_option(
      "--sol-anchors", a.sol_anchors,
      "JSON file {workload uuid: {\"sol_latency_ms\": x}}: the workloads' speed-of-light times (the data set "
      "carries none)");
  sol->add_option("--python", a.python, "Python interpreter with torch and safetensors (as for kernelbench)");
  sol->add_option("--seeds", a.seeds, "Input seeds")->capture_default_str()->check(CLI::Range(1, 100));
  sol->add_option("--device", a.device, "Where the reference runs: cpu or cuda")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  sol->add_option("--timeout", a.timeout_s, "Seconds allowed for the whole import")->capture_default_str();
  sol->add_flag("--json", a.json, "Print a JSON summary: per workload ok, problem dir, seconds or reason");
  sol->callback([&a] { a.sol = true; });
}

int run_import(const ImportArgs& a) {
  if (!fs::exists(a.source)) throw UserError(a.source + ": no such file or directory");
  const std::string python = kernelbench_python(a.python);
  const fs::path summary = kernelbench_json_path("import");
  const std::string what = a.sol ? "import sol-execbench" : "import kernelbench";
  std::vector<std::string> args = {a.sol ? "import-sol" : "import",
                                   fs::absolute(a.source).string(),
                                   "--out",
                                   fs::absolute(a.out).string(),
                                   "--seeds",
                                   std::to_string(a.seeds),
                                   "--inits",
                                   std::to_string(a.sol ? 1 : a.inits),  // no parameters
                                   "--device",
                                   a.device};
  if (a.sol && !a.sol_anchors.empty()) {
    if (!fs::is_regular_file(a.sol_anchors)) throw UserError(a.sol_anchors + ": --sol-anchors: no such file");
    args.insert(args.end(), {"--sol-anchors", fs::absolute(a.sol_anchors).string()});
  }
  if (!a.max_bytes.empty())
    args.insert(args.end(), {"--max-bytes", std::to_string(parse_byte_size(a.max_bytes, "--max-bytes"))});
  if (a.json) args.insert(args.end(), {"--json-out", summary.string()});
  // On a terminal: a live line (which file, how many done, what is left) from the helper's
  // progress events, and its lines printed as they come. Elsewhere (and with --json) its output
  // is printed once it ends, as it always was.
  const ProgressOutput term = stderr_progress_output();
  std::optional<Progress> live;
  bool started = false;  // an item is in work
  std::function<void(const std::string&)> on_line;
  if (term.terminal && !a.json) {
    args.push_back("--progress-events");
    live.emplace(what, 0, term);
    on_line = [&](const std::string& line) {
      static const std::string tag = "mblast_kernelbench: progress: ";
      if (line.rfind(tag + "total ", 0) == 0) {
        live->set_total(std::strtoul(line.c_str() + tag.size() + 6, nullptr, 10));
      } else if (line.rfind(tag + "start ", 0) == 0) {
        if (started) live->done("");
        live->start(fs::path(line.substr(tag.size() + 6)).filename().string(), "import");
        started = true;
      } else if (line.find(": imported ") != std::string::npos) {  // a result (and the count): stdout, as before
        Progress::suspend_active();
        std::fprintf(stdout, "%s\n", line.c_str());
        std::fflush(stdout);
        Progress::resume_active();
      } else {  // a failure or a note: stderr
        live->print(line);
      }
    };
  }
  auto r = run_kernelbench_tool(python, args, a.timeout_s, on_line);
  if (live) {
    if (started) live->done("");
    live.reset();
  }
  std::error_code ec;
  const bool some_failed = r.exit.exited && r.exit.code == 1;  // each failure has its line, plus the summary
  if (!r.ok() && !some_failed) {
    fs::remove(summary, ec);
    throw UserError(what + ": " + kernelbench_tool_failure(r));
  }
  if (a.json) {
    std::ifstream in(summary);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    fs::remove(summary, ec);
    if (j.is_discarded()) throw Error(what + ": the helper wrote no readable summary");
    std::cout << j.dump(2) << "\n";
  } else if (!on_line) {  // (printed as they came otherwise)
    std::fputs(r.output.c_str(), some_failed ? stderr : stdout);
  }
  return some_failed ? 1 : 0;
}

}  // namespace mblast
