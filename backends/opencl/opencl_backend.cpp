// The opencl backend: a candidate is one C++ file (host code plus OpenCL C kernels as strings)
// built into a shared object linked against the ICD loader, so the same candidate runs on
// PoCL, NVIDIA's OpenCL and an Adreno phone.
#include "opencl_backend.h"

#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <vector>

#include "mblast/process.h"
#include "opencl_device.h"

namespace mblast::runner::opencl {

namespace {
// A candidate that includes CLBlast's header (clblast.h, clblast_c.h) calls the library.
bool includes_clblast(const std::string& source) {
  return std::regex_search(source, std::regex(R"(#\s*include\s*[<"]clblast(_c)?\.h[>"])"));
}

std::string compiler_for(const nlohmann::json& target) {
  if (target.contains("build") && target["build"].contains("cxx")) return target["build"]["cxx"].get<std::string>();
  if (const char* cxx = std::getenv("MBLAST_CXX")) return cxx;
  return "c++";
}
}  // namespace

std::string OpenclBackend::toolchain_id(const nlohmann::json& target) {
  auto r = run_command({compiler_for(target), "--version"}, 20);
  return "opencl|" + r.output.substr(0, r.output.find('\n'));
}

BuildOutcome OpenclBackend::build(const BuildRequest& req) {
  BuildOutcome out;
  const auto src = req.out_dir / "candidate.cpp";
  {
    std::FILE* f = std::fopen(src.c_str(), "wb");
    if (!f) throw Error("cannot write " + src.string());
    std::fwrite(req.source.data(), 1, req.source.size(), f);
    std::fclose(f);
  }
  out.artifact = req.out_dir / "candidate.so";
  std::vector<std::string> argv = {compiler_for(req.target),
                                   "-std=c++17",
                                   "-O2",
                                   "-fPIC",
                                   "-shared",
                                   "-Wl,--no-undefined",
                                   "-DCL_TARGET_OPENCL_VERSION=120",
                                   "-I" + req.include_dir.string(),
                                   src.string(),
                                   "-o",
                                   out.artifact.string(),
                                   "-lOpenCL"};
  if (req.target.contains("build") && req.target["build"].contains("cxxflags"))
    for (const auto& f : req.target["build"]["cxxflags"]) argv.insert(argv.end() - 4, f.get<std::string>());
  if (includes_clblast(req.source)) argv.insert(argv.end() - 1, "-lclblast");  // before the ICD loader it uses
  out.command = shell_quote(argv);
  auto r = run_command(argv, req.timeout_s, req.out_dir);
  out.log = r.output;
  if (r.timed_out) out.log += "\n[mblast] the compiler did not finish within " + std::to_string(req.timeout_s) + " s";
  out.ok = r.ok();
  return out;
}

nlohmann::json OpenclBackend::environment() {
  nlohmann::json env;
  auto cxx = run_command({compiler_for(nlohmann::json::object()), "--version"}, 20);
  env["host_compiler"] = cxx.output.substr(0, cxx.output.find('\n'));
  const char* vendors = std::getenv("OCL_ICD_VENDORS");
  env["icd_vendors"] = vendors ? vendors : "/etc/OpenCL/vendors";
  // Listing platforms loads the ICDs but creates no context: cheap and safe in the runner.
  nlohmann::json plats = nlohmann::json::array();
  cl_uint n = 0;
  if (clGetPlatformIDs(0, nullptr, &n) == CL_SUCCESS && n > 0) {
    std::vector<cl_platform_id> ids(n);
    clGetPlatformIDs(n, ids.data(), nullptr);
    for (cl_platform_id p : ids) {
      auto str = [&](cl_platform_info what) {
        size_t len = 0;
        clGetPlatformInfo(p, what, 0, nullptr, &len);
        std::string v(len, '\0');
        clGetPlatformInfo(p, what, len, v.data(), nullptr);
        while (!v.empty() && v.back() == '\0') v.pop_back();
        return v;
      };
      plats.push_back({{"name", str(CL_PLATFORM_NAME)},
                       {"version", str(CL_PLATFORM_VERSION)},
                       {"vendor", str(CL_PLATFORM_VENDOR)}});
    }
  }
  env["platforms"] = plats;
  if (plats.empty())
    env["missing"] = "no OpenCL platform: install an ICD (pocl-opencl-icd, or the GPU vendor's driver)";
  return env;
}

std::vector<std::filesystem::path> OpenclBackend::sandbox_read_paths() const {
  namespace fs = std::filesystem;
  std::vector<fs::path> icds;  // .icd files, or folders of them
  if (const char* v = std::getenv("OCL_ICD_VENDORS"); v && *v) icds.emplace_back(v);
  if (const char* f = std::getenv("OCL_ICD_FILENAMES"); f && *f) {
    std::stringstream ss(f);
    for (std::string item; std::getline(ss, item, ':');)
      if (!item.empty()) icds.emplace_back(item);
  }
  std::vector<fs::path> paths;
  auto add_library_of = [&](const fs::path& icd) {
    std::ifstream in(icd);
    std::string lib;
    std::getline(in, lib);
    while (!lib.empty() && (lib.back() == '\r' || lib.back() == ' ')) lib.pop_back();
    if (!lib.empty() && lib.front() == '/') paths.push_back(fs::path(lib).parent_path());
  };
  std::error_code ec;
  for (const auto& p : icds) {
    if (!fs::exists(p, ec)) continue;
    paths.push_back(p);
    if (fs::is_directory(p, ec)) {
      for (const auto& e : fs::directory_iterator(p, ec))
        if (e.path().extension() == ".icd") add_library_of(e.path());
    } else {
      add_library_of(p);
    }
  }
  return paths;
}

// PoCL's CPU driver pins its i-th thread to CPU i when POCL_AFFINITY=1. Unpinned, on a small VM,
// PoCL's threads after the worker's eviction walk moved between the CPUs and waited for one, which
// made kernels markedly slower (benchmarks/results/measurement-design-figures.json,
// pocl-thread-pinning). Only
// where a process may run on every online CPU 0..n-1: PoCL aborts when it cannot pin a thread.
// NVIDIA's OpenCL ignores it.
static bool pocl_can_pin_threads() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return false;
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (online < 2 || online > CPU_SETSIZE) return false;
  for (long c = 0; c < online; ++c)
    if (!CPU_ISSET(c, &allowed)) return false;
  // More threads than CPUs (the user's POCL_MAX_PTHREAD_COUNT) could not all be pinned.
  if (const char* n = std::getenv("POCL_MAX_PTHREAD_COUNT"); n && std::atol(n) > online) return false;
  return CPU_COUNT(&allowed) == online;
}

std::map<std::string, std::string> OpenclBackend::worker_environment(const nlohmann::json& target) const {
  if (nvidia_platform(target) || !pocl_can_pin_threads()) return {};
  return {{"POCL_AFFINITY", "1"}};
}

std::unique_ptr<Device> OpenclBackend::open(const nlohmann::json& target) {
  return std::make_unique<OpenclDevice>(target);
}

}  // namespace mblast::runner::opencl
