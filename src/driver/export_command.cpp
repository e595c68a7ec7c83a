#include "mblast/driver/export_command.h"

#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "mblast/driver/kernelbench_tool.h"
#include "mblast/error.h"
#include "mblast/paths.h"
#include "mblast/problem.h"

namespace mblast {

namespace fs = std::filesystem;

void add_export(CLI::App& app, ExportArgs& a) {
  auto* c = app.add_subcommand("export", "Write a candidate in another tool's format (KernelBench ModelNew)");
  c->footer(
      "Example:\n"
      "  mblast export problems/kb/19_ReLU/candidates/naive.cuda.cu --problem problems/kb/19_ReLU \\\n"
      "      --format kernelbench --out 19_ReLU_new.py\n"
      "The file holds the problem's model.py (Model, get_inputs, get_init_inputs) and ModelNew(Model):\n"
      "the same __init__ and parameters, with forward calling the candidate through\n"
      "torch.utils.cpp_extension.load_inline (cuda: on the current stream; opencl: CPU tensors copied\n"
      "to and from an OpenCL device). The ABI header is inlined, so the file stands alone.");
  c->add_option("candidate", a.candidate, "Candidate source <label>.<backend>.<ext> (cuda or opencl)")->required();
  c->add_option("-p,--problem", a.problem, "Problem directory imported from KernelBench (holds model.py)")->required();
  c->add_option("--format", a.format, "Output format")->capture_default_str()->check(CLI::IsMember({"kernelbench"}));
  c->add_option("-o,--out", a.out, "File to write (default: <problem>_<label>_<backend>_kernelbench.py here)");
  c->add_option("--backend", a.backend, "cuda or opencl (default: from the candidate's file name)")
      ->check(CLI::IsMember({"cuda", "opencl", "rvv"}));
  c->add_option("--python", a.python,
                "Python interpreter (default: $MBLAST_PYTHON, else mblast's .venv, else python3)");
  c->add_flag("--json", a.json, "Print {out, problem, candidate, backend, format} as JSON");
}

std::string candidate_backend(const std::string& filename) {
  const std::string name = fs::path(filename).filename().string();
  const auto last = name.rfind('.');
  if (last == std::string::npos || last == 0) return "";
  const auto prev = name.rfind('.', last - 1);
  if (prev == std::string::npos) return "";
  return name.substr(prev + 1, last - prev - 1);
}

std::string export_kernelbench(const ExportArgs& a) {
  if (!fs::is_regular_file(a.candidate)) throw UserError(a.candidate + ": no such candidate file");
  Problem p = load_problem(a.problem);
  if (!fs::exists(p.dir / "model.py"))
    throw UserError(
        p.dir.string() +
        " has no model.py: only problems made by `mblast import kernelbench` can be exported to KernelBench");
  std::string backend = a.backend.empty() ? candidate_backend(a.candidate) : a.backend;
  if (backend == "rvv")
    throw UserError(
        "an rvv candidate cannot be exported to KernelBench: PyTorch cannot call a RISC-V program (cuda and opencl can "
        "be)");
  if (backend != "cuda" && backend != "opencl")
    throw UserError("cannot tell the candidate's backend from '" + fs::path(a.candidate).filename().string() +
                    "' (name it <label>.cuda.cu or <label>.opencl.cpp, or pass --backend)");
  std::string out = a.out;
  if (out.empty()) {
    std::string label = fs::path(a.candidate).filename().string();
    label = label.substr(0, label.find('.'));
    out = p.name + "_" + label + "_" + backend + "_kernelbench.py";
  }
  const fs::path abi = data_dir() / "include" / "mblast" / "abi.h";
  auto r =
      run_kernelbench_tool(kernelbench_python(a.python),
                           {"export", "--problem", p.dir.string(), "--candidate", fs::absolute(a.candidate).string(),
                            "--backend", backend, "--out", fs::absolute(out).string(), "--abi-header", abi.string()},
                           120);
  if (!r.ok()) throw UserError("export of " + a.candidate + ": " + kernelbench_tool_failure(r));
  return fs::absolute(out).string();
}

int run_export(const ExportArgs& a) {
  const std::string out = export_kernelbench(a);
  const std::string backend = a.backend.empty() ? candidate_backend(a.candidate) : a.backend;
  if (a.json) {
    const nlohmann::json j = {{"out", fs::absolute(out).string()},
                              {"problem", fs::absolute(a.problem).string()},
                              {"candidate", fs::absolute(a.candidate).string()},
                              {"backend", backend},
                              {"format", a.format}};
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "wrote " << out << " (KernelBench ModelNew calling " << fs::path(a.candidate).filename().string()
              << ", " << backend << ")\n";
  }
  return 0;
}

}  // namespace mblast
