// The NVIDIA libraries the cuda backend uses, opened with dlopen at run time so that the same
// mblast-runner binary runs (and reports the backend unavailable) on a machine without a driver.
// Private to backends/cuda.
//
//   Driver  libcuda.so.1       the driver API (device, context, memory, events, modules)
//   Nvrtc   libnvrtc.so.13     compiles the built-in peak kernels
//   Cublas  libcublas.so.13    tf32/bf16 GEMM peaks (optional: peaks stay 0 without it)
//
// Only cuda.h is needed to build. NVRTC and cuBLAS are declared here (the few entry points and
// enum values used), so neither nvrtc.h nor cublas_api.h has to be present at build time.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string>

#include "mblast/runner/backend.h"

namespace mblast::runner::cuda {

// The driver API entry points in use. Each member has the type of the function cuda.h declares
// under that name (for a versioned one, e.g. cuMemAlloc -> cuMemAlloc_v2, the versioned one),
// and is looked up under the symbol name cuda.h maps it to.
struct Driver {
  decltype(&::cuGetErrorName) GetErrorName = nullptr;
  decltype(&::cuGetErrorString) GetErrorString = nullptr;
  decltype(&::cuInit) Init = nullptr;
  decltype(&::cuDriverGetVersion) DriverGetVersion = nullptr;
  decltype(&::cuDeviceGetCount) DeviceGetCount = nullptr;
  decltype(&::cuDeviceGet) DeviceGet = nullptr;
  decltype(&::cuDeviceGetName) DeviceGetName = nullptr;
  decltype(&::cuDeviceGetAttribute) DeviceGetAttribute = nullptr;
  decltype(&::cuDeviceTotalMem) DeviceTotalMem = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) DevicePrimaryCtxRetain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) DevicePrimaryCtxRelease = nullptr;
  decltype(&::cuCtxSetCurrent) CtxSetCurrent = nullptr;
  decltype(&::cuCtxSynchronize) CtxSynchronize = nullptr;
  decltype(&::cuCtxSetLimit) CtxSetLimit = nullptr;
  decltype(&::cuCtxResetPersistingL2Cache) CtxResetPersistingL2Cache = nullptr;
  decltype(&::cuCtxGetLimit) CtxGetLimit = nullptr;
  decltype(&::cuCtxGetCurrent) CtxGetCurrent = nullptr;
  decltype(&::cuPointerGetAttribute) PointerGetAttribute = nullptr;
  decltype(&::cuStreamCreate) StreamCreate = nullptr;
  decltype(&::cuStreamDestroy) StreamDestroy = nullptr;
  decltype(&::cuStreamSynchronize) StreamSynchronize = nullptr;
  decltype(&::cuEventCreate) EventCreate = nullptr;
  decltype(&::cuEventDestroy) EventDestroy = nullptr;
  decltype(&::cuEventRecord) EventRecord = nullptr;
  decltype(&::cuEventSynchronize) EventSynchronize = nullptr;
  decltype(&::cuEventElapsedTime) EventElapsedTime = nullptr;
  decltype(&::cuMemGetInfo) MemGetInfo = nullptr;
  decltype(&::cuMemAlloc) MemAlloc = nullptr;
  decltype(&::cuMemFree) MemFree = nullptr;
  decltype(&::cuMemcpyHtoDAsync) MemcpyHtoDAsync = nullptr;
  decltype(&::cuMemcpyDtoHAsync) MemcpyDtoHAsync = nullptr;
  decltype(&::cuMemsetD8Async) MemsetD8Async = nullptr;
  decltype(&::cuModuleLoadData) ModuleLoadData = nullptr;
  decltype(&::cuModuleUnload) ModuleUnload = nullptr;
  decltype(&::cuModuleGetFunction) ModuleGetFunction = nullptr;
  decltype(&::cuLaunchKernel) LaunchKernel = nullptr;
  std::string library;  // the file that was opened

  // "CUDA_ERROR_X: text" for a CUresult.
  std::string error_text(CUresult r) const;
};

// The driver of this process, loaded on first use. Throws BackendError with one sentence when
// there is none ("no NVIDIA driver here: libcuda.so.1 not found") or it lacks an entry point.
const Driver& driver();

// Checks a CUresult-returning call at the call site; throws BackendError naming the expression.
#define MBLAST_CU_CHECK(drv, expr)                                                               \
  do {                                                                                           \
    const CUresult mblast_cu_err_ = (expr);                                                      \
    if (mblast_cu_err_ != CUDA_SUCCESS)                                                          \
      throw ::mblast::runner::BackendError(                                                      \
          ::mblast::describe_call((drv).error_text(mblast_cu_err_), #expr, __FILE__, __LINE__)); \
  } while (0)

// ---- NVRTC ------------------------------------------------------------------------------------

using nvrtc_result = int;  // nvrtcResult: NVRTC_SUCCESS == 0
struct nvrtc_program_st;
using nvrtc_program = nvrtc_program_st*;

struct Nvrtc {
  nvrtc_result (*Version)(int* major, int* minor) = nullptr;
  const char* (*GetErrorString)(nvrtc_result) = nullptr;
  nvrtc_result (*CreateProgram)(nvrtc_program* prog, const char* src, const char* name, int num_headers,
                                const char* const* headers, const char* const* include_names) = nullptr;
  nvrtc_result (*CompileProgram)(nvrtc_program prog, int num_options, const char* const* options) = nullptr;
  nvrtc_result (*GetProgramLogSize)(nvrtc_program prog, size_t* size) = nullptr;
  nvrtc_result (*GetProgramLog)(nvrtc_program prog, char* log) = nullptr;
  nvrtc_result (*GetCUBINSize)(nvrtc_program prog, size_t* size) = nullptr;
  nvrtc_result (*GetCUBIN)(nvrtc_program prog, char* cubin) = nullptr;
  nvrtc_result (*GetPTXSize)(nvrtc_program prog, size_t* size) = nullptr;
  nvrtc_result (*GetPTX)(nvrtc_program prog, char* ptx) = nullptr;
  nvrtc_result (*DestroyProgram)(nvrtc_program* prog) = nullptr;
  std::string library;  // the file that was opened

  std::string error_text(nvrtc_result r) const;
};

// NVRTC (libnvrtc.so.13, else libnvrtc.so, also from the CUDA toolkit's lib folder); throws
// BackendError saying why when it cannot be loaded.
const Nvrtc& nvrtc();

#define MBLAST_NVRTC_CHECK(lib, expr)                                                               \
  do {                                                                                              \
    const ::mblast::runner::cuda::nvrtc_result mblast_nvrtc_err_ = (expr);                          \
    if (mblast_nvrtc_err_ != 0)                                                                     \
      throw ::mblast::runner::BackendError(                                                         \
          ::mblast::describe_call((lib).error_text(mblast_nvrtc_err_), #expr, __FILE__, __LINE__)); \
  } while (0)

// ---- cuBLAS -----------------------------------------------------------------------------------

using cublas_status = int;  // cublasStatus_t: CUBLAS_STATUS_SUCCESS == 0
struct cublas_context_st;
using cublas_handle = cublas_context_st*;

// The enum values used (checked against cublas_api.h / library_types.h where they exist).
inline constexpr int kCublasOpN = 0;                  // CUBLAS_OP_N
inline constexpr int kCudaR16BF = 14;                 // CUDA_R_16BF
inline constexpr int kCudaR32F = 0;                   // CUDA_R_32F
inline constexpr int kCublasCompute32F = 68;          // CUBLAS_COMPUTE_32F
inline constexpr int kCublasCompute32FFastTF32 = 77;  // CUBLAS_COMPUTE_32F_FAST_TF32
inline constexpr int kCublasGemmDefault = -1;         // CUBLAS_GEMM_DEFAULT

struct Cublas {
  cublas_status (*Create)(cublas_handle* handle) = nullptr;
  cublas_status (*Destroy)(cublas_handle handle) = nullptr;
  cublas_status (*SetStream)(cublas_handle handle, CUstream stream) = nullptr;
  cublas_status (*GemmEx)(cublas_handle handle, int transa, int transb, int m, int n, int k, const void* alpha,
                          const void* A, int a_type, int lda, const void* B, int b_type, int ldb, const void* beta,
                          void* C, int c_type, int ldc, int compute_type, int algo) = nullptr;
  const char* (*GetStatusString)(cublas_status) = nullptr;  // may be missing in old versions
  std::string library;

  std::string error_text(cublas_status s) const;
};

// cuBLAS (libcublas.so.13, else libcublas.so). Returns nullptr and sets *why when it cannot be
// loaded: the GEMM peaks are optional.
const Cublas* cublas(std::string* why);

#define MBLAST_CUBLAS_CHECK(lib, expr)                                                               \
  do {                                                                                               \
    const ::mblast::runner::cuda::cublas_status mblast_cublas_err_ = (expr);                         \
    if (mblast_cublas_err_ != 0)                                                                     \
      throw ::mblast::runner::BackendError(                                                          \
          ::mblast::describe_call((lib).error_text(mblast_cublas_err_), #expr, __FILE__, __LINE__)); \
  } while (0)

// The CUDA toolkit's library folders, for libraries that are not on the loader's path.
std::string toolkit_root_guess();

}  // namespace mblast::runner::cuda
