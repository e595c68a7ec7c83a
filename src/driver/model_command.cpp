// `mblast optimize-model` and `mblast run-model` (include/mblast/driver/model_command.h, docs/model.md).
#include "mblast/driver/model_command.h"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "mblast/driver/baseline_command.h"
#include "mblast/driver/export_command.h"
#include "mblast/driver/import_command.h"
#include "mblast/driver/kernelbench_tool.h"
#include "mblast/driver/model_plan.h"
#include "mblast/driver/optimize_command.h"
#include "mblast/error.h"
#include "mblast/files.h"
#include "mblast/kb/knowledge_base.h"
#include "mblast/kb/model_experience.h"
#include "mblast/measure/evaluate.h"
#include "mblast/measure/runner_client.h"
#include "mblast/problem.h"
#include "mblast/progress.h"
#include "mblast/safetensors.h"

namespace mblast {

namespace fs = std::filesystem;
using nlohmann::json;

void add_optimize_model(CLI::App& app, OptimizeModelArgs& a) {
  auto* c = app.add_subcommand("optimize-model",
                               "Optimize a whole model: plan fusion groups, time them, optimize the hottest, "
                               "verify and time end to end, write a folder run-model runs");
  c->footer(
      "Example:\n"
      "  mblast optimize-model resnet_block.py --target pocl-cpu --max-bytes 4M --out resnet.mblast\n"
      "MODEL is a KernelBench-style .py file (Model, get_inputs, get_init_inputs), a TorchScript .pt\n"
      "(with --input-shape) or an ONNX file (--input-shape for symbolic dimensions). The folder gets plan.json, "
      "report.md, kernels/ and the imported problem;\n"
      "`mblast run-model DIR --target T` runs it. docs/model.md describes both.");
  c->add_option("model", a.model, "The model: FILE.py (KernelBench style), FILE.pt (TorchScript) or FILE.onnx")
      ->required();
  c->add_option("--runner", a.runner, kRunnerOptionHelp);
  c->add_option("-t,--target", a.target, "Target name or family (opencl, cpu, adreno, rvv, cuda)")
      ->capture_default_str();
  c->add_option("-o,--out", a.out,
                "The artifact folder (default: <model stem>.mblast beside the current folder); must not exist");
  c->add_option("--max-bytes", a.max_bytes, "Scale the model's size constants down until its tensors fit (64M, 4M)");
  c->add_option(
      "--input-shape", a.input_shapes,
      "An input's shape: name=1x3x224x224, once per input (TorchScript: every input, float32; ONNX: inputs with "
      "symbolic dimensions)");
  c->add_option("--evals", a.evals, "Kernel-loop evaluations for the whole model, split across groups by their share")
      ->capture_default_str()
      ->check(CLI::Range(0, 10000));
  c->add_option("--seeds", a.seeds, "Input seeds the model is verified on")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  c->add_option("--inits", a.inits, "Parameter initialisations it is verified on")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  c->add_option("--kb", a.kb, "Knowledge base file (default: $MBLAST_KB, else ~/.local/share/mblast/kb.sqlite)");
  c->add_option("--stitch", a.stitch,
                "GROUP=FILE: run your own candidate for a fusion group inside the model (its tensors as in "
                "kernels/groups/GROUP of an earlier run); kept where the model verifies and is faster. Once per group");
  c->add_option("--python", a.python, "Python interpreter with torch and safetensors");
  c->add_flag("--no-baseline", a.no_baseline, "Do not time PyTorch eager (nor onnxruntime for an ONNX model)");
  c->add_flag("--json", a.json, "Print the result as JSON");
}

void add_run_model(CLI::App& app, RunModelArgs& a) {
  auto* c = app.add_subcommand(
      "run-model", "Run an optimized model folder (from optimize-model) through the runner and write its outputs");
  c->footer(
      "Example:\n"
      "  mblast run-model resnet.mblast --target pocl-cpu --inputs x.safetensors --out y.safetensors\n"
      "Without --inputs the model's first stored input seed is used. The outputs are written as\n"
      "safetensors under the model's output names (default: DIR/outputs.safetensors).");
  c->add_option("dir", a.dir, "The folder optimize-model wrote")->required();
  c->add_option("-t,--target", a.target, "Target name or family (default: the one the folder was made for)");
  c->add_option("--runner", a.runner, kRunnerOptionHelp);
  c->add_option("--inputs", a.inputs, "A safetensors file with the model's inputs, under their names");
  c->add_option("-o,--out", a.out, "Where to write the outputs (safetensors)");
  c->add_flag("--json", a.json, "Print a JSON summary");
}

// ---------------------------------------------------------------- targets

namespace {

bool cuda_device_here() { return fs::exists("/dev/nvidiactl") || fs::exists("/dev/nvidia0"); }

// Why a target cannot run from here, "" when it can (as far as the driver can tell without a runner).
std::string unavailable_here(const Target& t) {
  if (auto why = t.unreachable_reason(); !why.empty()) return why;
  if (t.remote()) return "";
  const json dev = t.spec.value("device", json::object());
  const bool nvidia = t.backend == "cuda" || dev.value("platform_contains", "").find("NVIDIA") != std::string::npos;
  if (nvidia && !cuda_device_here()) return "no NVIDIA device on this machine";
  return "";
}

bool in_family(const Target& t, const std::string& f) {
  const json dev = t.spec.value("device", json::object());
  const json arch = t.spec.value("arch", json::object());
  const std::string afam = arch.is_object() ? arch.value("family", "") : "";
  if (t.name == f || t.backend == f || afam == f || t.name.rfind(f + "-", 0) == 0) return true;
  if (f == "cpu") return dev.is_object() && dev.value("type", "") == "cpu";
  if (f == "gpu") return t.backend == "cuda" || (dev.is_object() && dev.value("type", "") == "gpu");
  if (f == "riscv" || f == "risc-v" || f == "rv64") return t.backend == "rvv";
  if (f == "nvidia") return t.backend == "cuda";
  return false;
}

}  // namespace

Target resolve_target_family(const std::string& name, std::string* how, const std::string& runner_url) {
  const auto all = load_targets();
  std::string f = name;
  std::transform(f.begin(), f.end(), f.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (!runner_url.empty()) {
    // Whether the device is there is the runner's to say, at the first evaluation.
    for (const auto& t : all)
      if (t.name == name || in_family(t, f)) {
        Target r = t;
        r.runner = parse_runner_url(runner_url);
        if (how)
          *how = fmt::format("{}{} through the runner {}", t.name, t.name == name ? "" : " (family '" + name + "')",
                             runner_url);
        return r;
      }
    throw UserError("no target or target family named '" + name + "' (see `mblast targets`)");
  }
  for (const auto& t : all)
    if (t.name == name) {
      if (auto why = unavailable_here(t); !why.empty())
        throw UserError("target " + name + " cannot run from here: " + why);
      if (how) *how = t.name;
      return t;
    }
  std::vector<const Target*> fam;
  for (const auto& t : all)
    if (in_family(t, f)) fam.push_back(&t);
  if (fam.empty()) throw UserError("no target or target family named '" + name + "' (see `mblast targets`)");
  std::string reasons;
  for (const auto* t : fam) {
    const auto why = unavailable_here(*t);
    if (why.empty()) {
      if (how) *how = fmt::format("{} (family '{}': {})", t->name, name, t->description);
      return *t;
    }
    reasons += fmt::format("{}{}: {}", reasons.empty() ? "" : "; ", t->name, why);
  }
  throw UserError("no target of family '" + name + "' can run from here: " + reasons);
}

// ---------------------------------------------------------------- helpers

namespace {

double median_of(const json& eval) {
  if (!eval.is_object() || !eval.value("correct", false) || !eval.contains("time") || !eval["time"].is_object())
    return NAN;
  return eval["time"].value("median", NAN);
}

std::string unit_of(const json& eval) {
  if (!eval.is_object() || !eval.contains("time") || !eval["time"].is_object()) return "us";
  return eval["time"].value("unit", "us");
}

json fraction_of_peak(const json& eval) {
  if (eval.is_object() && eval.contains("fraction_of_peak")) return eval["fraction_of_peak"];
  return nullptr;
}

std::string one_line_reason(const json& eval) {
  std::string kind = eval.value("failure_kind", json("")).is_string() ? eval["failure_kind"].get<std::string>() : "";
  std::string why = eval.value("reason", json("")).is_string() ? eval["reason"].get<std::string>() : "";
  std::string s = kind.empty() ? why : kind + (why.empty() ? "" : ": " + why);
  if (auto nl = s.find('\n'); nl != std::string::npos) s = s.substr(0, nl);
  return s;
}

// --input-shape name=1x3x224x224, once per input, as Python list items `("name", [1, 3, 224, 224]),`.
std::string python_shape_items(const std::vector<std::string>& shapes) {
  static const std::regex re(R"(([A-Za-z_][A-Za-z0-9_.:/-]*)=([0-9]+(x[0-9]+)*))");
  std::string list;
  for (const auto& s : shapes) {
    std::smatch m;
    if (!std::regex_match(s, m, re)) throw UserError("--input-shape " + s + ": expected name=1x3x224x224");
    std::string dims = m[2].str();
    std::replace(dims.begin(), dims.end(), 'x', ',');
    list += fmt::format("    ({}, [{}]),\n", json(m[1].str()).dump(), dims);
  }
  return list;
}

// A TorchScript file as a KernelBench-style module: Model loads it, get_inputs makes float32
// inputs of the shapes given, so the importer traces it with make_fx like any other model.
fs::path torchscript_wrapper(const fs::path& pt, const std::vector<std::string>& shapes, const fs::path& dir) {
  if (shapes.empty())
    throw UserError(pt.string() +
                    ": a TorchScript model needs its input shapes: --input-shape name=1x3x224x224 (one per input)");
  const std::string list = python_shape_items(shapes);
  fs::create_directories(dir);
  const fs::path py = dir / (pt.stem().string() + ".py");
  write_file_atomically(
      py, fmt::format(R"(# A TorchScript model as a KernelBench-style module (written by mblast optimize-model).
import torch

_PATH = {}
_INPUTS = [
{}]


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.m = torch.jit.load(_PATH, map_location="cpu")

    def forward(self, *xs):
        return self.m(*xs)


def get_inputs():
    return [torch.randn(*shape) for _, shape in _INPUTS]


def get_init_inputs():
    return []
)",
                      json(fs::absolute(pt).string()).dump(), list));
  return py;
}

// An ONNX file as a KernelBench-style module: Model runs the graph with torch ops
// (tools/kernelbench/onnx_model.py), after checking that it agrees with onnxruntime on three
// seeds (once; the verdict is kept beside the module). MBLAST_ONNX_PATH tells the baseline to time
// onnxruntime too.
fs::path onnx_wrapper(const fs::path& onnx, const std::vector<std::string>& shapes, const fs::path& dir) {
  const std::string list = python_shape_items(shapes);
  fs::create_directories(dir);
  const fs::path py = dir / (onnx.stem().string() + ".py");
  write_file_atomically(
      py, fmt::format(R"PY(# An ONNX model as a KernelBench-style module (written by mblast optimize-model).
import json
import os
import sys

import torch

sys.path.insert(0, {tools})
from kernelbench.onnx_model import OnnxImportError, OnnxModule, check_against_onnxruntime, example_inputs

MBLAST_ONNX_PATH = {path}
_SHAPES = dict([
{list}])
# The verdict is kept beside this file (when it is one: exec'd text has no __file__).
_FILE = globals().get("__file__")
_CHECK = os.path.join(os.path.dirname(os.path.abspath(_FILE)), "onnxruntime_check.json") if _FILE else None


def onnxruntime_check():
    if _CHECK and os.path.exists(_CHECK):
        with open(_CHECK) as f:
            return json.load(f)
    r = check_against_onnxruntime(MBLAST_ONNX_PATH, _SHAPES)
    if not _CHECK:
        return r
    try:
        with open(_CHECK + ".tmp", "w") as f:
            json.dump(r, f)
        os.replace(_CHECK + ".tmp", _CHECK)
    except OSError:
        pass
    return r


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.m = OnnxModule(MBLAST_ONNX_PATH, _SHAPES)
        r = onnxruntime_check()
        if not r["ok"]:
            raise OnnxImportError(
                f"mblast's reading of the ONNX graph disagrees with onnxruntime (max abs error "
                f"{{r['max_abs_error']:.3g}}, max rel error {{r['max_rel_error']:.3g}})"
            )

    def forward(self, *xs):
        return self.m(*xs)


def get_inputs():
    return example_inputs(MBLAST_ONNX_PATH, _SHAPES)


def get_init_inputs():
    return []
)PY",
                      fmt::arg("tools", json(kernelbench_tool_path().parent_path().string()).dump()),
                      fmt::arg("path", json(fs::absolute(onnx).string()).dump()), fmt::arg("list", list)));
  return py;
}

// The model as a KernelBench-style file, or a one-line reason.
fs::path model_source(const OptimizeModelArgs& a, const fs::path& work) {
  const fs::path m = a.model;
  if (!fs::exists(m)) throw UserError(a.model + ": no such file");
  if (fs::is_directory(m)) throw UserError(a.model + ": is a directory; give one model file");
  std::string ext = m.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (ext == ".onnx") return onnx_wrapper(m, a.input_shapes, work / "source");
  if (ext == ".pt2")
    throw UserError(a.model + ": torch.export archives (.pt2) are not supported yet (torch.export needs torch >= 2.1)");
  if (ext == ".pt" || ext == ".pth") {
    std::ifstream f(m, std::ios::binary);
    char magic[2] = {0, 0};
    f.read(magic, 2);
    if (!(magic[0] == 'P' && magic[1] == 'K'))
      throw UserError(a.model + ": not a TorchScript file (torch.jit.save writes a zip archive; this is not one)");
    return torchscript_wrapper(m, a.input_shapes, work / "source");
  }
  if (ext != ".py")
    throw UserError(a.model + ": unknown model format '" + ext + "' (expected .py, .pt, .pt2 or .onnx)");
  const std::string text = read_file(m);
  if (!std::regex_search(text, std::regex(R"((^|\n)class\s+Model\b)")))
    throw UserError(a.model +
                    ": no class Model (a KernelBench-style file defines Model, get_inputs and get_init_inputs)");
  if (text.find("def get_inputs") == std::string::npos)
    throw UserError(a.model + ": no get_inputs() (KernelBench style needs it)");
  return m;
}

fs::path import_model(const fs::path& src, const OptimizeModelArgs& a, const fs::path& into) {
  const std::string python = kernelbench_python(a.python);
  std::vector<std::string> args = {"import",   fs::absolute(src).string(),
                                   "--out",    fs::absolute(into).string(),
                                   "--seeds",  std::to_string(a.seeds),
                                   "--inits",  std::to_string(a.inits),
                                   "--device", "cpu"};
  if (!a.max_bytes.empty())
    args.insert(args.end(), {"--max-bytes", std::to_string(parse_byte_size(a.max_bytes, "--max-bytes"))});
  auto r = run_kernelbench_tool(python, args, 3600);
  if (!r.ok()) {
    // The helper ends with a count ("imported 0, failed 1"); the reason is the line before it.
    std::string why = kernelbench_tool_failure(r);
    std::istringstream lines(r.output);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("mblast_kernelbench: ", 0) == 0 && line.find("imported ") == std::string::npos)
        why = line.substr(20);
    throw UserError(why.find(a.model) == std::string::npos ? a.model + ": " + why : why);
  }
  for (const auto& e : fs::directory_iterator(into))
    if (fs::exists(e.path() / "problem.json")) return e.path();
  throw UserError(a.model + ": the importer wrote no problem");
}

json eager_baseline(const Problem& p, const Target& t, const std::string& python_arg) {
  std::string why;
  const std::string device = baseline_device(t, &why);
  if (device.empty()) return {{"unavailable", why}};
  const fs::path out = kernelbench_json_path("baseline");
  std::vector<std::string> args = {"baseline",  p.dir.string(), "--device",      device, "--warmup",   "5",
                                   "--repeats", "30",           "--min-seconds", "0.3",  "--json-out", out.string()};
  for (auto& x : baseline_cache_args(t)) args.push_back(std::move(x));
  auto r = run_kernelbench_tool(kernelbench_python(python_arg), args, 1800);
  std::error_code ec;
  if (!r.ok() || !fs::exists(out)) {
    fs::remove(out, ec);
    return {{"unavailable", kernelbench_tool_failure(r)}};
  }
  json j = json::parse(read_file(out), nullptr, false);
  fs::remove(out, ec);
  if (j.is_discarded()) return {{"unavailable", "the helper wrote no readable result"}};
  return j;
}

// What the KB knows for an op class on the target's family: the best-ranked actions (and their
// record there), and the actions a constraint excludes.
json kb_knowledge(kb::KnowledgeBase& kb, const Target& t, const std::string& op_class) {
  kb::StateSignature sig;
  sig.backend = t.backend;
  sig.arch = kb::arch_of_target_spec(t.backend, t.spec.dump());
  sig.target = t.name;
  sig.op_class = op_class;
  kb::RetrievalOptions ro;
  ro.limit = 0;
  json top = json::array(), forbidden = json::array();
  for (const auto& r : kb.ranked_actions(sig, ro)) {
    if (r.excluded) {
      if (forbidden.size() < 3) forbidden.push_back({{"action", r.id}, {"why", r.excluded_reason}});
      continue;
    }
    if (top.size() < 3)
      top.push_back({{"action", r.id},
                     {"title", r.title},
                     {"tries", r.tries},
                     {"wins", r.wins},
                     {"mean_log_speedup", r.mean_log_speedup},
                     {"provenance", r.provenance}});
  }
  return {{"family", sig.target_family()}, {"op_class", op_class}, {"top", top}, {"forbidden", forbidden}};
}

std::string knowledge_line(const json& k) {
  std::string s;
  for (const auto& a : k["top"]) {
    if (!s.empty()) s += ", ";
    s += a["action"].get<std::string>();
    if (a["tries"].get<int>() > 0) s += fmt::format(" ({}/{} won)", a["wins"].get<int>(), a["tries"].get<int>());
  }
  if (s.empty()) s = "nothing";
  if (!k["forbidden"].empty()) {
    s += "; excluded:";
    for (const auto& f : k["forbidden"]) s += " " + f["action"].get<std::string>();
  }
  return s;
}

std::string fmt_time(double v, const std::string& unit) {
  if (!std::isfinite(v)) return "-";
  return unit == "us" ? fmt::format("{:.1f} us", v) : fmt::format("{:.0f} {}", v, unit);
}

// A number of a result object, NAN when absent or null (value() throws on a stored null).
double num(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : NAN;
}

std::string fmt_frac(const json& f) { return f.is_number() ? fmt::format("{:.1f} %", 100 * f.get<double>()) : "-"; }

std::string report_markdown(const json& r) {
  std::string md =
      fmt::format("# {} on {}\n\n", r["model"]["name"].get<std::string>(), r["target"]["name"].get<std::string>());
  md += fmt::format("Model file: `{}`. Target: {}.\n\n", r["model"]["source"].get<std::string>(),
                    r["target"]["resolved"].get<std::string>());
  const auto& e2e = r["end_to_end"];
  md += "## End to end\n\n";
  md += fmt::format("- verified against PyTorch: **{}** on {} seed(s) x {} init(s){}\n",
                    e2e.value("correct", false) ? "yes" : "NO", r["model"]["seeds"].get<int>(),
                    r["model"]["inits"].get<int>(),
                    e2e.value("correct", false) ? "" : " (" + e2e.value("reason", std::string()) + ")");
  md += fmt::format("- model time: {} (median, the runner's rules); fraction of peak {}\n",
                    fmt_time(num(e2e, "median"), e2e.value("unit", "us")),
                    fmt_frac(e2e.value("fraction_of_peak", json())));
  if (e2e.contains("eager_us") && e2e["eager_us"].is_number())
    md += fmt::format("- PyTorch eager{}: {:.1f} us; speedup over eager **{:.2f}x**\n",
                      e2e.contains("onnxruntime_check")
                          ? " (of the ONNX graph as mblast reads it: a Python-dispatched torch op per node; "
                            "onnxruntime below is the model's own baseline)"
                          : "",
                      e2e["eager_us"].get<double>(), num(e2e, "speedup_vs_eager"));
  else
    md += "- PyTorch eager: " + e2e.value("eager_note", std::string("not measured")) + "\n";
  if (e2e.contains("onnxruntime_check")) {
    const auto& c = e2e["onnxruntime_check"];
    md += fmt::format(
        "- the ONNX graph as mblast reads it, against onnxruntime: {} (max abs error {:.3g}, {} output(s))\n",
        c.value("ok", false) ? "agrees" : "DISAGREES", num(c, "max_abs_error"), c.value("outputs", 0));
  }
  if (e2e.contains("onnxruntime_us") && e2e["onnxruntime_us"].is_number())
    md += fmt::format("- onnxruntime: {:.1f} us; speedup over onnxruntime **{:.2f}x**\n",
                      e2e["onnxruntime_us"].get<double>(), num(e2e, "speedup_vs_onnxruntime"));
  else if (e2e.contains("onnxruntime_note"))
    md += "- onnxruntime: " + e2e["onnxruntime_note"].get<std::string>() + "\n";
  md += fmt::format("- model kernel: `{}` ({})\n", e2e.value("candidate", std::string()),
                    e2e.value("origin", std::string()));
  if (const json m = r.value("module", json()); m.is_object())
    md += m.contains("file") ? fmt::format("- PyTorch module: `{}`, class `{}`: {}\n\n", m["file"].get<std::string>(),
                                           m.value("class", std::string("ModelNew")), m.value("note", std::string()))
                             : "- " + m.value("note", std::string("no PyTorch module")) + "\n\n";
  else
    md += "\n";
  md += "## Fusion groups\n\n";
  md += "| # | group | kind | ATen ops | time before | after | share | fraction of peak | outcome |\n";
  md += "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  for (const auto& g : r["groups"]) {
    std::string ops;
    for (const auto& o : g["ops"]) ops += (ops.empty() ? "" : ", ") + o.get<std::string>();
    md +=
        fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", g["index"].get<int>(),
                    g["name"].get<std::string>(), g["kind"].get<std::string>(), ops,
                    fmt_time(num(g, "before"), g.value("unit", "us")), fmt_time(num(g, "after"), g.value("unit", "us")),
                    g["share"].is_number() ? fmt::format("{:.1f} %", 100 * g["share"].get<double>()) : "-",
                    fmt_frac(g.value("fraction_of_peak", json())), g.value("outcome", std::string()));
  }
  if (!r["unknown_ops"].empty()) {
    md += "\nOps the planner has no op class for (they run through the generic lowering):";
    for (const auto& o : r["unknown_ops"]) md += " `" + o.get<std::string>() + "`";
    md += "\n";
  }
  md +=
      "\nGroup times are each group's kernel timed alone, as a problem of its own (its inputs from the generic "
      "lowering's\n"
      "buffers); their sum need not equal the model's time (launches, caches). A group's loop result is kept beside "
      "the\n"
      "model (kernels/groups/); the model's kernel runs every group as the lowering pipeline generated it.\n";
  return md;
}

}  // namespace

// ---------------------------------------------------------------- optimize-model

int run_optimize_model(const OptimizeModelArgs& a) {
  std::string how;
  const Target target = resolve_target_family(a.target, &how, a.runner);
  const std::string ext = model::dialect_extension(target.backend);
  const fs::path out =
      fs::absolute(a.out.empty() ? fs::path(fs::path(a.model).stem().string() + ".mblast") : fs::path(a.out));
  if (fs::exists(out) && !fs::is_empty(out))
    throw UserError(out.string() + " exists and is not empty; give another --out");
  auto say = [&](const std::string& s) {
    if (a.json) return;
    Progress::suspend_active();  // the live line (stderr) is cleared while stdout gets the line
    std::cout << s << std::flush;
    Progress::resume_active();
  };
  say(fmt::format("target: {}\n", how));
  // Built in a sibling folder and renamed at the end: a failed run leaves nothing half-written.
  const fs::path work_root = out.parent_path() / (".tmp-" + out.filename().string() + "-" + std::to_string(::getpid()));
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code ec;
      if (!p.empty()) fs::remove_all(p, ec);
    }
  } cleanup{work_root};
  fs::create_directories(work_root);
  const fs::path src = model_source(a, work_root);
  say(fmt::format("importing {} ...\n", a.model));
  const fs::path pdir = import_model(src, a, work_root / "problem");
  Problem problem = load_problem(pdir);

  // ---- plan
  model::ModelPlan plan;
  try {
    plan = model::plan_model(problem);
  } catch (const UserError& e) {
    const std::string what = e.what();
    if (src != fs::path(a.model) && what.find("get_attr") != std::string::npos)
      throw UserError(
          a.model +
          ": make_fx traces this TorchScript module with a large constant tensor inside the graph (get_attr) "
          "that is none of its parameters, which the lowering does not take; give the model as a "
          "KernelBench-style .py file");
    throw UserError(a.model + ": " + what);
  }
  // --stitch GROUP=FILE: checked before anything runs.
  std::map<std::string, fs::path> user_stitch;
  for (const auto& s : a.stitch) {
    const auto eq = s.find('=');
    const std::string name = s.substr(0, eq);
    const fs::path file = eq == std::string::npos ? fs::path() : fs::path(s.substr(eq + 1));
    if (eq == std::string::npos || name.empty() || file.empty())
      throw UserError("--stitch " + s + ": expected GROUP=FILE");
    if (std::none_of(plan.groups.begin(), plan.groups.end(), [&](const model::Group& g) { return g.name == name; })) {
      std::string names;
      for (const auto& g : plan.groups) names += (names.empty() ? "" : ", ") + g.name;
      throw UserError("--stitch " + s + ": the plan has no group " + name + " (its groups: " + names + ")");
    }
    if (!fs::is_regular_file(file)) throw UserError("--stitch " + s + ": no such file");
    if (file.string().size() < ext.size() || file.string().compare(file.string().size() - ext.size(), ext.size(), ext))
      throw UserError("--stitch " + s + ": a " + target.backend + " candidate ends in " + ext);
    user_stitch[name] = fs::absolute(file);
  }
  kb::KnowledgeBase kb(a.kb.empty() ? kb::default_kb_path() : fs::path(a.kb));
  json groups = json::array();
  std::map<std::string, json> knowledge;
  for (const auto& g : plan.groups) {
    if (!knowledge.count(g.kind)) knowledge[g.kind] = kb_knowledge(kb, target, g.kind);
    json j = g.to_json();
    j["knowledge"] = knowledge[g.kind];
    groups.push_back(j);
  }
  say(fmt::format("plan: {} fusion group(s) from the lowering pipeline\n", plan.groups.size()));
  for (const auto& g : plan.groups) {
    std::string reads;
    for (const auto& b : g.reads) reads += (reads.empty() ? "" : ",") + b;
    say(fmt::format("  {:>3} {:<28} {:<13} {:<34} {} -> {}   KB: {}\n", g.index, g.name, g.kind,
                    fmt::format("{}", fmt::join(g.ops, ",")), reads, g.writes, knowledge_line(knowledge[g.kind])));
  }
  if (!plan.unknown_ops.empty())
    say(fmt::format("  ops without an op class (generic lowering): {}\n", fmt::join(plan.unknown_ops, ", ")));
  fs::create_directories(work_root / "kernels" / "groups");
  const fs::path model_generic = work_root / "kernels" / ("model_generic" + ext);
  write_file_atomically(model_generic, model::emit_for(target.backend, plan.schedule, problem));

  EvalOptions eo;
  eo.quiet = true;
  RunnerClient client(target.runner);
  // The live line counts evaluations: the generic kernel, each group alone, the loops' budget, the
  // model end to end (and PyTorch eager); each evaluation's phase comes from evaluate().
  ProgressOptions live_options;
  live_options.enabled = !a.json;
  Progress live("optimize-model", 2 + plan.groups.size() + std::max(0, a.evals) + (a.no_baseline ? 0 : 1),
                stderr_progress_output(), live_options);
  auto loop_done = [&live](int given, const json& lr) {  // a loop that stopped early gives its rest back
    const int used = lr.is_object() ? lr.value("evaluations", given) : 0;
    if (used < given) live.set_total(live.total() - static_cast<size_t>(given - used));
    live.done("", static_cast<size_t>(std::max(0, std::min(used, given))));
  };

  // ---- the whole model's generic kernel: verified on every seed, timed
  say("verifying the model's generic kernel ...\n");
  live.start("the model's generic kernel");
  json before = evaluate(problem, target, model_generic, eo, &client);
  if (!before.value("correct", false)) {
    throw UserError(fmt::format("{}: the model's generic lowering does not verify on {}: {}", a.model, target.name,
                                one_line_reason(before)));
  }
  const std::string unit = unit_of(before);
  live.done("");

  // ---- each group timed alone
  say("timing each group ...\n");
  const auto probe = model::write_probe(problem, plan, target, work_root / "work" / "probe");
  std::map<std::pair<int, int>, TensorSet> captured;
  EvalOptions po = eo;
  json pr = capture_outputs(probe.problem, target, probe.candidate, po, captured);
  // Without every buffer's values no group can be timed alone: the groups keep their generic
  // kernels, unmeasured, and the report says why; the model is still verified and timed whole.
  const std::string probe_failure =
      pr.value("correct", false) ? "" : "the probe of the model's buffers failed: " + one_line_reason(pr);
  EvalOptions go = eo;
  go.min_seconds = 0.05;
  go.min_repeats = 5;
  go.max_wall_seconds = 1;
  go.spot_checks = 1;
  std::vector<Problem> gprob;
  std::vector<fs::path> gcand;
  double total = 0;
  for (size_t i = 0; i < plan.groups.size() && !probe_failure.empty(); ++i) {
    groups[i]["before"] = nullptr;
    groups[i]["outcome"] = "not timed alone: " + probe_failure;
  }
  for (size_t i = 0; i < plan.groups.size() && probe_failure.empty(); ++i) {
    const auto& g = plan.groups[i];
    const fs::path gdir = work_root / "work" / "groups" / g.name;
    gcand.push_back(model::write_group_problem(problem, plan, g, target, captured, gdir));
    gprob.push_back(load_problem(gdir));
    live.start("group " + g.name + " alone");
    json ge = evaluate(gprob.back(), target, gcand.back(), go, &client);
    const double t = median_of(ge);
    groups[i]["before"] = std::isfinite(t) ? json(t) : json(nullptr);
    groups[i]["unit"] = unit_of(ge);
    groups[i]["fraction_of_peak"] = fraction_of_peak(ge);
    if (!ge.value("correct", false))
      groups[i]["outcome"] = "its generic kernel did not verify alone: " + one_line_reason(ge);
    if (std::isfinite(t)) total += t;
    fs::copy_file(gcand.back(), work_root / "kernels" / "groups" / (g.name + ext));
    live.done("");
  }
  if (!probe_failure.empty()) live.set_total(live.total() - plan.groups.size());  // none timed alone
  for (auto& g : groups)
    g["share"] = g["before"].is_number() && total > 0 ? json(g["before"].get<double>() / total) : json(nullptr);

  // ---- the hottest groups through the kernel loop, the budget split by share
  std::vector<size_t> order(plan.groups.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return groups[x]["share"].is_number() &&
           (!groups[y]["share"].is_number() || groups[x]["share"].get<double>() > groups[y]["share"].get<double>());
  });
  // What earlier models taught (model-level experiences on this family): an op class whose groups
  // went through the loop at least twice without a gain is not given evaluations again; its share
  // goes to the others.
  kb::StateSignature fam_sig;
  fam_sig.backend = target.backend;
  fam_sig.arch = kb::arch_of_target_spec(target.backend, target.spec.dump());
  const std::string family = fam_sig.target_family();
  std::map<std::string, std::string> skip_kind;
  for (const auto& g : plan.groups) {
    if (skip_kind.count(g.kind)) continue;
    int tries = 0, gains = 0;
    for (const auto& e : kb::model_experiences(kb, family, g.kind, 0)) {
      if (e["decision"] != "group-loop") continue;
      ++tries;
      if (e["speedup"].is_number() && e["speedup"].get<double>() > 1.05) ++gains;
    }
    skip_kind[g.kind] =
        tries >= 2 && gains == 0
            ? fmt::format("the KB: {} earlier {} group(s) on {} got no gain from the loop", tries, g.kind, family)
            : "";
  }
  double loop_total = 0;
  for (size_t i = 0; i < plan.groups.size(); ++i)
    if (skip_kind[plan.groups[i].kind].empty() && groups[i]["share"].is_number())
      loop_total += groups[i]["share"].get<double>();
  // Where a builtin generator recognises the whole model (an MLP chain, say), its kernels replace
  // every group at once: a quarter of the budget (at least one evaluation) is kept for that loop.
  const int reserve = a.evals > 0 && builtin_generates(problem, target) ? std::max(1, a.evals / 4) : 0;
  const int group_evals = a.evals - reserve;
  int left = group_evals;
  loop::OptimizeOptions lo;
  lo.kb_path = a.kb.empty() ? kb::default_kb_path() : fs::path(a.kb);
  lo.quiet = true;
  lo.eval = eo;
  lo.confirm = true;
  for (size_t i : order) {
    auto& gj = groups[i];
    if (!gj["share"].is_number()) continue;
    if (const auto& why = skip_kind[plan.groups[i].kind]; !why.empty()) {
      if (!gj.contains("outcome")) gj["outcome"] = "generic lowering kept: " + why;
      gj["after"] = gj["before"];
      continue;
    }
    const double part = loop_total > 0 ? gj["share"].get<double>() / loop_total : 0;
    const int give = std::min(left, static_cast<int>(std::lround(group_evals * part)));
    if (give < 1) {
      if (!gj.contains("outcome")) gj["outcome"] = "generic lowering (below the loop's budget share)";
      gj["after"] = gj["before"];
      continue;
    }
    left -= give;
    say(fmt::format("kernel loop on {} ({} evaluations, {:.0f} % of the model's group time) ...\n", plan.groups[i].name,
                    give, 100 * gj["share"].get<double>()));
    loop::OptimizeOptions o = lo;
    o.budget.max_evals = give;
    o.out_dir = work_root / "work" / "groups" / plan.groups[i].name / "loop";
    json lr;
    live.start("kernel loop on " + plan.groups[i].name);
    try {
      lr = optimize_with_builtin(gprob[i], target, gcand[i], o);
    } catch (const std::exception&
                 e) {  // a loop that fails (a re-timing refused on a busy machine) leaves the group generic
      gj["outcome"] = std::string("generic lowering kept: the loop failed: ") + e.what();
      gj["after"] = gj["before"];
      loop_done(give, json());
      continue;
    }
    loop_done(give, lr);
    gj["loop"] = {{"evaluations", lr.value("evaluations", 0)},
                  {"run", lr.value("run", "")},
                  {"improved", lr.value("improved", false)},
                  {"speedup", lr.value("speedup", 1.0)},
                  {"stop_reason", lr.value("stop_reason", "")}};
    if (lr.value("improved", false) && lr.value("correct", false)) {
      const fs::path best = work_root / "kernels" / "groups" / (plan.groups[i].name + ".best" + ext);
      fs::copy_file(lr["candidate"].get<std::string>(), best);
      gj["after"] = gj["before"].get<double>() / lr.value("speedup", 1.0);
      gj["outcome"] = fmt::format("loop: {:.2f}x alone ({}), kept beside the model", lr.value("speedup", 1.0),
                                  lr.value("best_family", std::string("?")));
    } else {
      gj["after"] = gj["before"];
      gj["outcome"] = "generic lowering kept: " + lr.value("note", std::string("no verified candidate was faster"));
    }
  }

  // ---- stitching: the groups whose loop found a faster kernel run it inside the model's kernel,
  // the rest their generic kernels; kept only where the whole verifies and is faster than the
  // generic model (the groups were timed alone, on the probe's values).
  fs::path model_kernel = work_root / "kernels" / ("model" + ext);
  std::string origin = "the lowering pipeline (lower.generic)";
  fs::path model_start = model_generic;
  json stitched;
  lower::Stitches stitches;
  for (size_t i = 0; i < plan.groups.size() && i < gprob.size(); ++i) {
    fs::path best = work_root / "kernels" / "groups" / (plan.groups[i].name + ".best" + ext);
    if (user_stitch.count(plan.groups[i].name)) best = user_stitch.at(plan.groups[i].name);  // the user's, first
    if (fs::exists(best))
      stitches.push_back({static_cast<size_t>(plan.groups[i].index), plan.groups[i].name, read_file(best), gprob[i]});
  }
  if (!stitches.empty()) {
    json names = json::array();
    for (const auto& g : stitches) names.push_back(g.name);
    stitched = {{"groups", names}, {"candidate", "kernels/model_stitched" + ext}};
    const fs::path sp = work_root / "kernels" / ("model_stitched" + ext);
    write_file_atomically(sp, model::emit_for(target.backend, plan.schedule, problem, stitches));
    say(fmt::format("verifying the model with {} stitched group(s) ...\n", stitches.size()));
    json se = evaluate(problem, target, sp, eo, &client);
    stitched["correct"] = se.value("correct", false);
    stitched["median"] = median_of(se);
    if (!se.value("correct", false)) {
      stitched["note"] = "not kept: " + one_line_reason(se);
    } else if (!(median_of(se) < median_of(before))) {
      stitched["note"] =
          fmt::format("not kept: {:.4g} {} against the generic model's {:.4g}", median_of(se), unit, median_of(before));
    } else {
      model_start = sp;
      origin = fmt::format("the generic lowering with {} group(s) stitched in ({})", stitches.size(),
                           fmt::format("{}", fmt::join(names.begin(), names.end(), ", ")));
      stitched["note"] = fmt::format("kept: {:.2f}x the generic model", median_of(before) / median_of(se));
      for (size_t i = 0; i < plan.groups.size(); ++i)
        for (const auto& g : stitches)
          if (g.name == plan.groups[i].name)
            groups[i]["outcome"] = groups[i]["outcome"].get<std::string>() + "; stitched into the model";
    }
    say("  stitching: " + stitched.value("note", std::string()) + "\n");
  }

  // ---- end to end: the whole model through the loop's remaining budget, then verified and timed as a whole
  fs::copy_file(model_start, model_kernel);
  json whole_loop;
  left += reserve;
  if (left > 0) {
    say(fmt::format("kernel loop on the whole model ({} evaluations) ...\n", left));
    loop::OptimizeOptions o = lo;
    o.budget.max_evals = left;
    o.out_dir = work_root / "work" / "model-loop";
    live.start("kernel loop on the whole model");
    try {
      json lr = optimize_with_builtin(problem, target, model_start, o);
      loop_done(left, lr);
      whole_loop = {{"evaluations", lr.value("evaluations", 0)},
                    {"improved", lr.value("improved", false)},
                    {"speedup", lr.value("speedup", 1.0)},
                    {"stop_reason", lr.value("stop_reason", "")}};
      if (lr.value("improved", false) && lr.value("correct", false)) {
        fs::copy_file(lr["candidate"].get<std::string>(), model_kernel, fs::copy_options::overwrite_existing);
        origin = "the kernel loop on the whole model (" + lr.value("best_family", std::string("?")) + ")";
      }
    } catch (const std::exception& e) {
      whole_loop = {{"note", std::string("the loop failed: ") + e.what()}};
      loop_done(left, json());
    }
  }
  say("verifying and timing the model end to end ...\n");
  live.start("the model end to end");
  json final_eval = evaluate(problem, target, model_kernel, eo, &client);
  json e2e = {{"correct", final_eval.value("correct", false)},
              {"median", median_of(final_eval)},
              {"unit", unit_of(final_eval)},
              {"fraction_of_peak", fraction_of_peak(final_eval)},
              {"candidate", "kernels/model" + ext},
              {"origin", origin},
              {"generic_median", median_of(before)}};
  if (!e2e["correct"].get<bool>()) e2e["reason"] = one_line_reason(final_eval);
  live.done("");
  if (!whole_loop.is_null()) e2e["loop"] = whole_loop;
  if (!stitched.is_null()) e2e["stitched"] = stitched;
  if (!a.no_baseline) {
    say("timing PyTorch eager ...\n");
    live.start("PyTorch eager", "baseline");
    json b = eager_baseline(problem, target, a.python);
    live.done("");
    // One baseline's time and the model's speedup over it, or why there is none.
    const bool timed = std::isfinite(median_of(final_eval)) && unit_of(final_eval) == "us";
    auto against = [&](const char* name, const json& r, const std::string& why_not) {
      if (timed && r.is_object() && r.contains("median_us") && r["median_us"].is_number()) {
        e2e[std::string(name) + "_us"] = r["median_us"];
        e2e[std::string("speedup_vs_") + name] = r["median_us"].get<double>() / median_of(final_eval);
      } else {
        e2e[std::string(name) + "_note"] = why_not;
      }
    };
    against("eager", b.value("eager", json::object()), b.value("unavailable", std::string("no eager time")));
    // An ONNX model's own runtime, timed by the same helper on the same inputs.
    if (const json ort = b.value("onnxruntime", json()); ort.is_object())
      against("onnxruntime", ort, ort.value("unavailable", std::string("no onnxruntime time")));
  }
  // How mblast's reading of an ONNX graph compared with onnxruntime before anything was lowered.
  if (const fs::path check = src.parent_path() / "onnxruntime_check.json"; fs::exists(check)) {
    json c = json::parse(read_file(check), nullptr, false);
    if (!c.is_discarded()) e2e["onnxruntime_check"] = c;
  }
  for (auto& [k, v] : e2e.items())
    if (v.is_number_float() && !std::isfinite(v.get<double>())) v = nullptr;

  // ---- a PyTorch module in place of the original: the problem's Model and ModelNew(Model), whose
  // forward runs the model's kernel (cuda on the current stream; opencl on CPU tensors). Its C++
  // extension is built at the first import, by torch.utils.cpp_extension (docs/kernelbench.md "Export").
  json module;
  if (target.backend == "cuda" || target.backend == "opencl") {
    const fs::path mp = work_root / "module" / (problem.name + ".py");
    try {
      fs::create_directories(mp.parent_path());
      ExportArgs ea;
      ea.candidate = model_kernel.string();
      ea.problem = pdir.string();
      ea.out = mp.string();
      ea.backend = target.backend;
      ea.python = a.python;
      export_kernelbench(ea);
      module = {{"file", "module/" + mp.filename().string()},
                {"class", "ModelNew"},
                {"note",
                 "import the file and use ModelNew(*get_init_inputs()) where Model was: the same parameters, "
                 "forward through the model's kernel, for the shapes it was verified at"}};
    } catch (const std::exception& e) {
      module = {{"note", std::string("no module: ") + e.what()}};
    }
  } else {
    module = {{"note", "no module: PyTorch cannot call a " + target.backend + " kernel on this host"}};
  }

  // ---- the artifact
  json result = {{"format", 1},
                 {"model",
                  {{"name", problem.name},
                   {"source", fs::absolute(a.model).string()},
                   {"problem", "problem/" + pdir.filename().string()},
                   {"seeds", static_cast<int>(problem.seeds.size())},
                   {"inits", static_cast<int>(problem.inits.size())},
                   {"max_bytes", a.max_bytes}}},
                 {"target",
                  {{"name", target.name},
                   {"backend", target.backend},
                   {"family", family},
                   {"requested", a.target},
                   {"resolved", how}}},
                 {"groups", groups},
                 {"unknown_ops", plan.unknown_ops},
                 {"evals", a.evals},
                 {"end_to_end", e2e},
                 {"module", module}};
  for (auto& g : result["groups"])
    for (const char* k : {"before", "after"})
      if (g.contains(k) && g[k].is_number_float() && !std::isfinite(g[k].get<double>())) g[k] = nullptr;
  write_file_atomically(work_root / "plan.json", result.dump(2) + "\n");
  write_file_atomically(work_root / "report.md", report_markdown(result));
  try {
    kb::record_model_experience(kb, result);
  } catch (const std::exception& e) {
    say(std::string("note: the model-level experience was not stored in the KB: ") + e.what() + "\n");
  }
  std::error_code ec;
  fs::remove_all(work_root / "work", ec);  // probes and per-group problems: rebuilt on demand, large
  fs::rename(work_root, out);
  cleanup.p.clear();
  if (a.json) {
    result["dir"] = out.string();
    std::cout << result.dump(2) << "\n";
  } else {
    std::cout << fmt::format(
        "end to end: {} on {} seed(s); {}{}\n", e2e["correct"].get<bool>() ? "verified" : "NOT verified",
        problem.seeds.size(), fmt_time(e2e["median"].is_number() ? e2e["median"].get<double>() : NAN, unit),
        e2e.contains("speedup_vs_eager") ? fmt::format(", {:.2f}x PyTorch eager", e2e["speedup_vs_eager"].get<double>())
                                         : "");
    std::cout << fmt::format("wrote {} (plan.json, report.md, kernels/)\n", out.string());
  }
  return e2e["correct"].get<bool>() ? 0 : 1;
}

// ---------------------------------------------------------------- run-model

int run_run_model(const RunModelArgs& a) {
  const fs::path dir = fs::absolute(a.dir);
  const fs::path planf = dir / "plan.json";
  if (!fs::exists(planf)) throw UserError(a.dir + ": no plan.json (not a folder optimize-model wrote)");
  json plan = json::parse(read_file(planf), nullptr, false);
  if (plan.is_discarded() || !plan.contains("model") || !plan.contains("target") || !plan.contains("end_to_end"))
    throw UserError(planf.string() + ": not a model plan (corrupt or from another tool)");
  std::string how;
  const Target target =
      resolve_target_family(a.target.empty() ? plan["target"]["name"].get<std::string>() : a.target, &how, a.runner);
  if (target.backend != plan["target"]["backend"].get<std::string>())
    throw UserError(fmt::format("{} was optimized for backend {}; target {} is {}", a.dir,
                                plan["target"]["backend"].get<std::string>(), target.name, target.backend));
  const Problem model = load_problem(dir / plan["model"]["problem"].get<std::string>());
  const fs::path cand = dir / plan["end_to_end"]["candidate"].get<std::string>();
  if (!fs::exists(cand)) throw UserError(cand.string() + ": missing (the folder is incomplete)");
  // A problem of one seed whose inputs are the user's: the runner runs the model on them.
  const fs::path tmp = dir / (".run-" + std::to_string(::getpid()));
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } cleanup{tmp};
  Problem p = model;
  p.dir = tmp;
  p.seeds = {model.seeds.front()};
  p.inits = {model.inits.front()};
  fs::create_directories(p.data_dir());
  fs::copy_file(model.dir / "problem.json", tmp / "problem.json");
  if (!a.inputs.empty()) {
    if (!fs::exists(a.inputs)) throw UserError(a.inputs + ": no such file");
    TensorSet in = load_checked(a.inputs, model.inputs);
    save_safetensors(p.inputs_file(p.seeds.front().seed), in);
  } else {
    fs::copy_file(model.inputs_file(p.seeds.front().seed), p.inputs_file(p.seeds.front().seed));
  }
  fs::copy_file(model.params_file(p.inits.front()), p.params_file(p.inits.front()));
  std::map<std::pair<int, int>, TensorSet> outputs;
  EvalOptions eo;
  eo.quiet = true;
  json r = capture_outputs(p, target, cand, eo, outputs);
  if (!r.value("correct", false))
    throw Error(fmt::format("the model failed on {}: {}", target.name, one_line_reason(r)));
  const fs::path outf = a.out.empty() ? dir / "outputs.safetensors" : fs::absolute(a.out);
  save_safetensors(outf, outputs.begin()->second);
  if (a.json) {
    std::cout << json{{"outputs", outf.string()}, {"target", target.name}}.dump(2) << "\n";
  } else {
    std::cout << fmt::format("ran {} on {}; outputs in {}\n", model.name, target.name, outf.string());
  }
  return 0;
}

}  // namespace mblast
