#include "mblast/driver/baseline_command.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "mblast/driver/kernelbench_tool.h"
#include "mblast/error.h"
#include "mblast/files.h"
#include "mblast/kb/records.h"
#include "mblast/problem.h"

namespace mblast {

namespace fs = std::filesystem;
using nlohmann::json;

void add_baseline(CLI::App& app, BaselineArgs& a) {
  auto* c = app.add_subcommand("baseline", "Time PyTorch eager and torch.compile on a problem, on a target's device");
  c->footer(
      "Example:\n"
      "  mblast baseline problems/kb/19_ReLU --target pocl-cpu\n"
      "Runs the problem's own model.py with its stored parameters (init 0) and rotating input sets\n"
      "from its seeds: warm-up, then a median over timed calls with caches flushed between them\n"
      "(L2 on CUDA), the device synchronised before the clock stops. CPU-side targets (pocl-cpu)\n"
      "time torch on the CPU, CUDA targets on the GPU; RVV targets have no PyTorch baseline.\n"
      "The figures are stored in PROBLEM/baselines.json under the target's name.\n"
      "Only problems made by `mblast import kernelbench` (they carry model.py) have a baseline.");
  c->add_option("problem", a.problem, "Problem directory imported from KernelBench")->required();
  c->add_option("-t,--target", a.target, "Target name (see `mblast targets`)")->capture_default_str();
  c->add_flag("--json", a.json, "Print the stored entry as JSON");
  c->add_flag("--no-compile", a.no_compile, "Do not time torch.compile");
  c->add_option(
      "--python", a.python,
      "Python interpreter with torch and safetensors (default: $MBLAST_PYTHON, else mblast's .venv, else python3)");
  c->add_option("--warmup", a.warmup, "Untimed calls first")->capture_default_str()->check(CLI::NonNegativeNumber);
  c->add_option("--repeats", a.repeats, "Minimum timed calls")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option(
       "--min-time", a.min_seconds,
       "Keep timing until the timing loop (timed calls and the cache flushes between them) has run this many seconds")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_option("--timeout", a.timeout_s, "Seconds allowed for the whole measurement")->capture_default_str();
}

std::string baseline_device(const Target& t, std::string* why) {
  auto no = [&](const std::string& reason) {
    if (why) *why = reason;
    return std::string();
  };
  if (t.remote())
    return no("target " + t.name + " is reached through its " + t.runner.transport +
              " runner, but PyTorch baselines run on this machine: run `mblast baseline` on the target's host");
  if (t.backend == "cuda") return "cuda";
  if (t.backend == "rvv")
    return no("target " + t.name +
              " is a RISC-V vector target: PyTorch has no RVV device; its baseline is "
              "clang -O3 auto-vectorised C (an autovec.rvv.c candidate timed with `mblast eval`)");
  if (t.backend == "opencl") {
    const json dev = t.spec.value("device", json::object());
    const std::string type = dev.value("type", "");
    const std::string platform = dev.value("platform_contains", "");
    if (type == "cpu") return "cpu";
    if (platform.find("NVIDIA") != std::string::npos) return "cuda";
    return no("target " + t.name + " is an OpenCL " + (type.empty() ? "device" : type) +
              " that PyTorch cannot drive; time PyTorch on a CPU or CUDA target instead");
  }
  return no("target " + t.name + " has backend '" + t.backend + "', which has no PyTorch device");
}

namespace {

json read_json_file(const fs::path& p) {
  std::ifstream in(p);
  if (!in) throw Error("cannot read " + p.string());
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded()) throw Error(p.string() + " is not valid JSON");
  return j;
}

class FileLock {
 public:
  explicit FileLock(const fs::path& p) : fd_(open_locked(p, LOCK_EX)) {
    if (fd_ < 0) throw Error("cannot lock " + p.string() + ": " + std::strerror(errno));
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

std::string stat_line(const json& s) {
  if (s.contains("unavailable")) return "unavailable: " + s["unavailable"].get<std::string>();
  std::string line =
      fmt::format("{:.3f} us  (p25 {:.3f}, p75 {:.3f}, spread {:.1f}%, {} samples)", s.value("median_us", 0.0),
                  s.value("p25_us", 0.0), s.value("p75_us", 0.0), s.value("spread_pct", 0.0), s.value("samples", 0));
  if (s.contains("check") && !s["check"].value("within_tolerance", true))
    line += "  [output outside the problem's tolerance]";
  if (s.contains("tf32")) line += "  [TF32 off: the default is outside the problem's tolerance]";
  return line;
}

}  // namespace

void store_baseline(const std::string& problem_dir, const std::string& target, const json& entry) {
  const fs::path dir = fs::absolute(problem_dir);
  const fs::path file = dir / "baselines.json";
  FileLock lock(dir / ".baselines.json.lock");
  json all = {{"format", 1}, {"baselines", json::object()}};
  if (fs::exists(file)) {
    json old = read_json_file(file);
    if (old.is_object() && old.contains("baselines") && old["baselines"].is_object()) all = old;
  }
  all["baselines"][target] = entry;
  write_file_atomically(file, all.dump(2) + "\n");
}

int run_baseline(const BaselineArgs& a) {
  Problem p = load_problem(a.problem);
  if (!fs::exists(p.dir / "model.py"))
    throw UserError(
        p.dir.string() +
        " has no model.py: only problems made by `mblast import kernelbench` carry a PyTorch module to time");
  Target t = find_target(a.target);
  std::string why;
  const std::string device = baseline_device(t, &why);
  if (device.empty()) throw UserError("no PyTorch baseline on " + t.name + ": " + why);

  const fs::path out = kernelbench_json_path("baseline");
  std::vector<std::string> args = {"baseline",      p.dir.string(),
                                   "--device",      device,
                                   "--warmup",      std::to_string(a.warmup),
                                   "--repeats",     std::to_string(a.repeats),
                                   "--min-seconds", fmt::format("{}", a.min_seconds),
                                   "--json-out",    out.string()};
  if (!a.no_compile) args.push_back("--compile");
  for (auto& x : baseline_cache_args(t)) args.push_back(std::move(x));
  const std::string python = kernelbench_python(a.python);
  CommandResult r = run_kernelbench_tool(python, args, a.timeout_s);
  std::error_code ec;
  if (!r.ok() || !fs::exists(out)) {
    fs::remove(out, ec);
    throw UserError("baseline of " + p.name + " on " + t.name + ": " + kernelbench_tool_failure(r));
  }
  json result;
  try {
    result = read_json_file(out);
  } catch (...) {
    fs::remove(out, ec);
    throw;
  }
  fs::remove(out, ec);
  json entry = result;
  entry["target"] = t.name;
  entry["backend"] = t.backend;
  entry["torch_device"] = device;
  entry["measured_at"] = kb::utc_now_iso();
  entry["python"] = python;
  if (p.provenance.contains("sha256")) entry["model_sha256"] = p.provenance["sha256"];
  store_baseline(p.dir.string(), t.name, entry);

  if (a.json) {
    std::cout << entry.dump(2) << "\n";
    return 0;
  }
  const json dev = entry.value("device", json::object());
  std::cout << fmt::format("baseline of {} on {} ({}: {}, torch {})\n", p.name, t.name, device, dev.value("name", "?"),
                           entry.value("torch", "?"));
  std::cout << fmt::format("  eager          {}\n", stat_line(entry.value("eager", json::object())));
  std::cout << fmt::format("  torch.compile  {}\n", stat_line(entry.value("compile", json::object())));
  if (dev.contains("blas_note")) std::cout << "note: " << dev["blas_note"].get<std::string>() << "\n";
  std::cout << fmt::format("stored in {}\n", (p.dir / "baselines.json").string());
  return 0;
}

}  // namespace mblast
