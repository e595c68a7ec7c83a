#include "mblast/driver/import_command.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "mblast/driver/kernelbench_tool.h"
#include "mblast/error.h"

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
  c->footer("Run `mblast import kernelbench --help` for the KernelBench importer.");
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
}

int run_import(const ImportArgs& a) {
  if (!fs::exists(a.source)) throw UserError(a.source + ": no such file or directory");
  const std::string python = kernelbench_python(a.python);
  const fs::path summary = kernelbench_json_path("import");
  std::vector<std::string> args = {"import",   fs::absolute(a.source).string(),
                                   "--out",    fs::absolute(a.out).string(),
                                   "--seeds",  std::to_string(a.seeds),
                                   "--inits",  std::to_string(a.inits),
                                   "--device", a.device};
  if (!a.max_bytes.empty())
    args.insert(args.end(), {"--max-bytes", std::to_string(parse_byte_size(a.max_bytes, "--max-bytes"))});
  if (a.json) args.insert(args.end(), {"--json-out", summary.string()});
  auto r = run_kernelbench_tool(python, args, a.timeout_s);
  std::error_code ec;
  const bool some_failed = r.exit.exited && r.exit.code == 1;  // each failure has its line, plus the summary
  if (!r.ok() && !some_failed) {
    fs::remove(summary, ec);
    throw UserError("import kernelbench: " + kernelbench_tool_failure(r));
  }
  if (a.json) {
    std::ifstream in(summary);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    fs::remove(summary, ec);
    if (j.is_discarded()) throw Error("import kernelbench: the helper wrote no readable summary");
    std::cout << j.dump(2) << "\n";
  } else {
    std::fputs(r.output.c_str(), some_failed ? stderr : stdout);
  }
  return some_failed ? 1 : 0;
}

}  // namespace mblast
