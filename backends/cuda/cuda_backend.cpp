// The cuda backend: a candidate is one .cu file (host code with the CUDA runtime API plus
// kernels) that nvcc builds into a shared object for the target's architecture; the worker runs
// it on device 0 through CudaDevice.
#include "cuda_backend.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <regex>

#include "cuda_device.h"
#include "cuda_driver.h"
#include "mblast/process.h"

namespace mblast::runner::cuda {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// target build.nvcc, else $MBLAST_NVCC, else the toolkit's nvcc (CUDA_HOME or /usr/local/cuda),
// else nvcc on PATH. Empty when there is none.
std::string nvcc_for(const json& target) {
  const json build = target.value("build", json::object());
  if (build.contains("nvcc") && build["nvcc"].is_string()) return build["nvcc"].get<std::string>();
  if (const char* e = std::getenv("MBLAST_NVCC"); e && *e) return e;
  const fs::path toolkit = fs::path(toolkit_root_guess()) / "bin" / "nvcc";
  if (::access(toolkit.c_str(), X_OK) == 0) return toolkit.string();
  if (auto p = find_program("nvcc")) return p->string();
  return "";
}

// The folder holding the libcudart.so next to this nvcc (bin/../lib64 and the like): the
// candidate gets it as its runpath, so it loads without LD_LIBRARY_PATH.
std::optional<fs::path> cudart_dir(const std::string& nvcc) {
  auto exe = find_program(nvcc);
  if (!exe) return std::nullopt;
  std::error_code ec;
  fs::path root = exe->parent_path().parent_path();
  const fs::path real_root = fs::canonical(*exe, ec).parent_path().parent_path();
  for (const fs::path& r : {root, ec ? root : real_root})
    for (const char* sub : {"lib64", "lib", "targets/x86_64-linux/lib"})
      if (fs::exists(r / sub / "libcudart.so", ec)) return r / sub;
  return std::nullopt;
}

std::string gencode_of(const json& target) {
  const json arch = target.value("arch", json::object());
  if (arch.contains("gencode") && arch["gencode"].is_string()) return arch["gencode"].get<std::string>();
  if (arch.contains("sm") && arch["sm"].is_string()) return "sm_" + arch["sm"].get<std::string>();
  return "";
}

// "sm_90a" -> arch=compute_90a,code=sm_90a; "compute_90" -> arch=compute_90,code=compute_90 (PTX).
std::string gencode_flag(const std::string& gencode) {
  const bool ptx = gencode.rfind("compute_", 0) == 0;
  std::string v = gencode;
  for (const char* prefix : {"sm_", "compute_"})
    if (v.rfind(prefix, 0) == 0) v = v.substr(std::string(prefix).size());
  return "arch=compute_" + v + ",code=" + (ptx ? "compute_" : "sm_") + v;
}

// The last line of `nvcc --version` ("Build cuda_13.0.r13.0/compiler.36424714_0").
std::string nvcc_version(const std::string& nvcc) {
  try {
    auto r = run_command({nvcc, "--version"}, 30);
    std::string out = r.output;
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' ')) out.pop_back();
    const size_t nl = out.find_last_of('\n');
    return nl == std::string::npos ? out : out.substr(nl + 1);
  } catch (const Error& e) {
    return std::string("nvcc failed: ") + e.what();
  }
}

const char* kNoNvcc =
    "nvcc not found (set \"build\": {\"nvcc\": ...} in the target, or MBLAST_NVCC, or CUDA_HOME, or put nvcc on PATH)";

bool includes_header(const std::string& source, const char* pattern) {
  return std::regex_search(source, std::regex(std::string(R"(#\s*include\s*[<"])") + pattern + R"(\.h[>"])"));
}

}  // namespace

std::string CudaBackend::toolchain_id(const json& target) {
  const std::string nvcc = nvcc_for(target);
  return "cuda|" + (nvcc.empty() ? std::string("nvcc not found") : nvcc_version(nvcc)) + "|" + gencode_of(target);
}

std::string CudaBackend::unavailable_reason(const json& target) {
  try {
    driver();
  } catch (const BackendError& e) {
    return e.what();
  }
  if (nvcc_for(target).empty()) return std::string("no CUDA toolkit here: ") + kNoNvcc;
  return "";
}

json CudaBackend::environment() {
  json env;
  std::vector<std::string> missing;
  try {
    const Driver& d = driver();
    int v = 0;
    env["libcuda"] = d.library;
    if (d.DriverGetVersion(&v) == CUDA_SUCCESS)  // needs no cuInit and opens no device
      env["driver_version"] = std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
  } catch (const BackendError& e) {
    env["libcuda"] = nullptr;
    missing.push_back(e.what());
  }
  env["toolkit_root"] = toolkit_root_guess();
  const std::string nvcc = nvcc_for(json::object());
  if (nvcc.empty()) {
    env["nvcc"] = nullptr;
    missing.push_back(kNoNvcc);
  } else {
    env["nvcc"] = nvcc;
    env["nvcc_version"] = nvcc_version(nvcc);
  }
  try {
    const Nvrtc& n = nvrtc();
    int major = 0, minor = 0;
    n.Version(&major, &minor);
    env["nvrtc"] = n.library;
    env["nvrtc_version"] = std::to_string(major) + "." + std::to_string(minor);
  } catch (const BackendError& e) {
    env["nvrtc"] = nullptr;
    missing.push_back(std::string(e.what()) + " (needed to measure peaks)");
  }
  std::string why;
  if (const Cublas* c = cublas(&why)) {
    env["cublas"] = c->library;
  } else {
    env["cublas"] = nullptr;
    missing.push_back(why + " (tf32/bf16 peaks stay unmeasured)");
  }
  if (!missing.empty()) {
    std::string m;
    for (const auto& s : missing) m += (m.empty() ? "" : "; ") + s;
    env["missing"] = m;
  }
  return env;
}

BuildOutcome CudaBackend::build(const BuildRequest& req) {
  const std::string nvcc = nvcc_for(req.target);
  if (nvcc.empty()) throw Error(std::string("cuda backend: ") + kNoNvcc);
  BuildOutcome out;
  const std::string gencode = gencode_of(req.target);
  if (gencode.empty()) {
    out.log = "[mblast] target " + req.target.value("name", std::string("?")) +
              " names no architecture: add \"arch\": {\"gencode\": \"sm_90a\"} (or \"sm\": \"90\")";
    return out;
  }
  const fs::path src = req.out_dir / "candidate.cu";
  {
    std::FILE* f = std::fopen(src.c_str(), "wb");
    if (!f) throw Error("cannot write " + src.string());
    const bool ok = std::fwrite(req.source.data(), 1, req.source.size(), f) == req.source.size();
    if (std::fclose(f) != 0 || !ok) throw Error("cannot write " + src.string());
  }
  out.artifact = req.out_dir / "candidate.so";
  std::vector<std::string> argv = {
      nvcc,      "-std=c++17", "-O3",       "-shared",  "-Xcompiler",          "-fPIC",
      "-cudart", "shared",     "-lineinfo", "-gencode", gencode_flag(gencode), "-I" + req.include_dir.string()};
  const json build = req.target.value("build", json::object());
  if (build.contains("nvcc_flags"))
    for (const auto& f : build["nvcc_flags"]) argv.push_back(f.get<std::string>());
  argv.insert(argv.end(), {src.string(), "-o", out.artifact.string(), "-Xlinker", "--no-undefined"});
  if (auto dir = cudart_dir(nvcc)) argv.insert(argv.end(), {"-Xlinker", "-rpath", "-Xlinker", dir->string()});
  if (includes_header(req.source, "(cublas|cublas_v2|cublas_api|cublasLt|cublasXt)"))
    argv.insert(argv.end(), {"-lcublas", "-lcublasLt"});
  if (includes_header(req.source, "cudnn\\w*")) argv.push_back("-lcudnn");
  out.command = shell_quote(argv);
  auto r = run_command(argv, req.timeout_s, req.out_dir);
  out.log = r.output;
  if (r.timed_out) out.log += "\n[mblast] nvcc did not finish within " + std::to_string(req.timeout_s) + " s";
  out.ok = r.ok() && fs::exists(out.artifact);
  return out;
}

std::vector<fs::path> CudaBackend::sandbox_read_paths() const {
  // The toolkit (NVRTC, cuBLAS, the candidates' libcudart) when it lives outside the defaults.
  std::vector<fs::path> v;
  std::error_code ec;
  const fs::path root = toolkit_root_guess();
  if (fs::exists(root, ec)) {
    v.push_back(root);
    const fs::path real = fs::canonical(root, ec);
    if (!ec && real != root) v.push_back(real);
  }
  return v;
}

std::unique_ptr<Device> CudaBackend::open(const json& target) { return std::make_unique<CudaDevice>(target); }

}  // namespace mblast::runner::cuda
