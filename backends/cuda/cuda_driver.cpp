// dlopen/dlsym of the NVIDIA libraries the cuda backend uses (see cuda_driver.h).
#include "cuda_driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

#if __has_include(<cublas_api.h>)
#include <cublas_api.h>
static_assert(static_cast<int>(CUBLAS_OP_N) == mblast::runner::cuda::kCublasOpN);
static_assert(static_cast<int>(CUDA_R_16BF) == mblast::runner::cuda::kCudaR16BF);
static_assert(static_cast<int>(CUDA_R_32F) == mblast::runner::cuda::kCudaR32F);
static_assert(static_cast<int>(CUBLAS_COMPUTE_32F) == mblast::runner::cuda::kCublasCompute32F);
static_assert(static_cast<int>(CUBLAS_COMPUTE_32F_FAST_TF32) == mblast::runner::cuda::kCublasCompute32FFastTF32);
static_assert(static_cast<int>(CUBLAS_GEMM_DEFAULT) == mblast::runner::cuda::kCublasGemmDefault);
#endif

namespace mblast::runner::cuda {

namespace {

namespace fs = std::filesystem;

// The symbol name cuda.h maps an API name to (cuMemAlloc -> "cuMemAlloc_v2"): the header decides,
// so the table always matches the declarations the members were typed from.
#define MBLAST_CU_STR2(x) #x
#define MBLAST_CU_STR(x) MBLAST_CU_STR2(x)

std::string dl_error() {
  const char* e = ::dlerror();
  return e ? e : "unknown dlopen error";
}

// Opens the first of `names` that loads: each as given (the loader's path), then from the CUDA
// toolkit's library folders. Returns nullptr with *why set when none does.
void* open_first(const std::vector<std::string>& names, std::string* opened, std::string* why) {
  std::vector<std::string> tries;
  for (const auto& n : names) tries.push_back(n);
  const std::string root = toolkit_root_guess();
  for (const char* sub : {"lib64", "lib", "targets/x86_64-linux/lib"})
    for (const auto& n : names) tries.push_back((fs::path(root) / sub / n).string());
  std::string first_error;
  for (const auto& t : tries) {
    if (t.find('/') != std::string::npos && !fs::exists(t)) continue;
    if (void* h = ::dlopen(t.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      *opened = t;
      return h;
    }
    if (first_error.empty()) first_error = dl_error();
  }
  *why = first_error;
  return nullptr;
}

template <typename F>
bool bind(void* lib, F& fn, const char* name) {
  fn = reinterpret_cast<F>(::dlsym(lib, name));
  return fn != nullptr;
}

struct DriverHolder {
  Driver d;
  std::string error;  // empty when loaded
};

DriverHolder load_driver() {
  DriverHolder h;
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const std::string e = dl_error();
    // A present but broken library (wrong architecture, missing dependency) says more than "not found".
    if (e.find("No such file") != std::string::npos || e.find("cannot open shared object") != std::string::npos)
      h.error = "no NVIDIA driver here: libcuda.so.1 not found";
    else
      h.error = "the NVIDIA driver library libcuda.so.1 could not be loaded: " + e;
    return h;
  }
  Driver& d = h.d;
  std::string missing;
  auto need = [&](auto& fn, const char* name, const char* fallback = nullptr) {
    if (bind(lib, fn, name)) return;
    if (fallback && bind(lib, fn, fallback)) return;
    missing += (missing.empty() ? "" : ", ") + std::string(name);
  };
#define MBLAST_CU_BIND(member, api) need(d.member, MBLAST_CU_STR(api))
  MBLAST_CU_BIND(GetErrorName, cuGetErrorName);
  MBLAST_CU_BIND(GetErrorString, cuGetErrorString);
  MBLAST_CU_BIND(Init, cuInit);
  MBLAST_CU_BIND(DriverGetVersion, cuDriverGetVersion);
  MBLAST_CU_BIND(DeviceGetCount, cuDeviceGetCount);
  MBLAST_CU_BIND(DeviceGet, cuDeviceGet);
  MBLAST_CU_BIND(DeviceGetName, cuDeviceGetName);
  MBLAST_CU_BIND(DeviceGetAttribute, cuDeviceGetAttribute);
  MBLAST_CU_BIND(DeviceTotalMem, cuDeviceTotalMem);
  MBLAST_CU_BIND(DevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain);
  MBLAST_CU_BIND(DevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease);
  MBLAST_CU_BIND(CtxSetCurrent, cuCtxSetCurrent);
  MBLAST_CU_BIND(CtxSynchronize, cuCtxSynchronize);
  MBLAST_CU_BIND(CtxSetLimit, cuCtxSetLimit);
  MBLAST_CU_BIND(CtxResetPersistingL2Cache, cuCtxResetPersistingL2Cache);
  MBLAST_CU_BIND(CtxGetLimit, cuCtxGetLimit);
  MBLAST_CU_BIND(CtxGetCurrent, cuCtxGetCurrent);
  MBLAST_CU_BIND(PointerGetAttribute, cuPointerGetAttribute);
  MBLAST_CU_BIND(StreamCreate, cuStreamCreate);
  MBLAST_CU_BIND(StreamDestroy, cuStreamDestroy);
  MBLAST_CU_BIND(StreamSynchronize, cuStreamSynchronize);
  MBLAST_CU_BIND(EventCreate, cuEventCreate);
  MBLAST_CU_BIND(EventDestroy, cuEventDestroy);
  MBLAST_CU_BIND(EventRecord, cuEventRecord);
  MBLAST_CU_BIND(EventSynchronize, cuEventSynchronize);
  // cuEventElapsedTime_v2 came with driver 12.8; the original has the same signature.
  need(d.EventElapsedTime, MBLAST_CU_STR(cuEventElapsedTime), "cuEventElapsedTime");
  MBLAST_CU_BIND(MemGetInfo, cuMemGetInfo);
  MBLAST_CU_BIND(MemAlloc, cuMemAlloc);
  MBLAST_CU_BIND(MemFree, cuMemFree);
  MBLAST_CU_BIND(MemcpyHtoDAsync, cuMemcpyHtoDAsync);
  MBLAST_CU_BIND(MemcpyDtoHAsync, cuMemcpyDtoHAsync);
  MBLAST_CU_BIND(MemsetD8Async, cuMemsetD8Async);
  MBLAST_CU_BIND(ModuleLoadData, cuModuleLoadData);
  MBLAST_CU_BIND(ModuleUnload, cuModuleUnload);
  MBLAST_CU_BIND(ModuleGetFunction, cuModuleGetFunction);
  MBLAST_CU_BIND(LaunchKernel, cuLaunchKernel);
#undef MBLAST_CU_BIND
  Dl_info info{};
  d.library =
      (d.Init && ::dladdr(reinterpret_cast<void*>(d.Init), &info) && info.dli_fname) ? info.dli_fname : "libcuda.so.1";
  if (!missing.empty()) {
    h.error = "the NVIDIA driver is too old for mblast: libcuda.so.1 lacks " + missing;
    // The handle stays open: nothing else may use a half-bound table, and closing a driver
    // library is not worth the risk.
  }
  return h;
}

}  // namespace

std::string toolkit_root_guess() {
  for (const char* var : {"CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"})
    if (const char* v = std::getenv(var); v && *v && fs::exists(v)) return v;
  return "/usr/local/cuda";
}

std::string Driver::error_text(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (GetErrorName) GetErrorName(r, &name);
  if (GetErrorString) GetErrorString(r, &text);
  std::string s = name ? name : "CUresult " + std::to_string(static_cast<int>(r));
  if (text) s += std::string(": ") + text;
  return s;
}

const Driver& driver() {
  static const DriverHolder holder = load_driver();
  if (!holder.error.empty()) throw BackendError(holder.error);
  return holder.d;
}

// ---- NVRTC ------------------------------------------------------------------------------------

std::string Nvrtc::error_text(nvrtc_result r) const {
  const char* s = GetErrorString ? GetErrorString(r) : nullptr;
  return s ? std::string(s) : "nvrtcResult " + std::to_string(r);
}

const Nvrtc& nvrtc() {
  static const std::pair<Nvrtc, std::string> holder = [] {
    std::pair<Nvrtc, std::string> h;
    std::string why;
    void* lib = open_first({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}, &h.first.library, &why);
    if (!lib) {
      h.second = "NVRTC could not be loaded (libnvrtc.so.13 / libnvrtc.so): " + why;
      return h;
    }
    Nvrtc& n = h.first;
    std::string missing;
    auto need = [&](auto& fn, const char* name) {
      if (!bind(lib, fn, name)) missing += (missing.empty() ? "" : ", ") + std::string(name);
    };
    need(n.Version, "nvrtcVersion");
    need(n.GetErrorString, "nvrtcGetErrorString");
    need(n.CreateProgram, "nvrtcCreateProgram");
    need(n.CompileProgram, "nvrtcCompileProgram");
    need(n.GetProgramLogSize, "nvrtcGetProgramLogSize");
    need(n.GetProgramLog, "nvrtcGetProgramLog");
    need(n.GetCUBINSize, "nvrtcGetCUBINSize");
    need(n.GetCUBIN, "nvrtcGetCUBIN");
    need(n.GetPTXSize, "nvrtcGetPTXSize");
    need(n.GetPTX, "nvrtcGetPTX");
    need(n.DestroyProgram, "nvrtcDestroyProgram");
    if (!missing.empty()) h.second = n.library + " lacks " + missing;
    return h;
  }();
  if (!holder.second.empty()) throw BackendError(holder.second);
  return holder.first;
}

// ---- cuBLAS -----------------------------------------------------------------------------------

std::string Cublas::error_text(cublas_status s) const {
  const char* t = GetStatusString ? GetStatusString(s) : nullptr;
  return t ? std::string(t) : "cublasStatus_t " + std::to_string(s);
}

const Cublas* cublas(std::string* why) {
  static const std::pair<Cublas, std::string> holder = [] {
    std::pair<Cublas, std::string> h;
    std::string err;
    void* lib = open_first({"libcublas.so.13", "libcublas.so.12", "libcublas.so"}, &h.first.library, &err);
    if (!lib) {
      h.second = "cuBLAS could not be loaded (libcublas.so.13 / libcublas.so): " + err;
      return h;
    }
    Cublas& c = h.first;
    std::string missing;
    auto need = [&](auto& fn, const char* name) {
      if (!bind(lib, fn, name)) missing += (missing.empty() ? "" : ", ") + std::string(name);
    };
    need(c.Create, "cublasCreate_v2");
    need(c.Destroy, "cublasDestroy_v2");
    need(c.SetStream, "cublasSetStream_v2");
    need(c.GemmEx, "cublasGemmEx");
    bind(lib, c.GetStatusString, "cublasGetStatusString");  // optional
    if (!missing.empty()) h.second = c.library + " lacks " + missing;
    return h;
  }();
  if (!holder.second.empty()) {
    if (why) *why = holder.second;
    return nullptr;
  }
  return &holder.first;
}

}  // namespace mblast::runner::cuda
