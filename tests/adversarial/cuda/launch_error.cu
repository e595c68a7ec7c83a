// Adversarial (cuda): its launch asks for 1 GiB of dynamic shared memory, the runtime refuses,
// and mblast_run reports the error and returns non-zero.
#include <mblast/abi.h>

#include <cuda_runtime.h>

#include <cstdio>

static char g_err[256];

__global__ void vec_add(const float* a, const float* b, float* y, long long n) {
  extern __shared__ float scratch[];
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < n) {
    scratch[threadIdx.x] = a[i];
    y[i] = scratch[threadIdx.x] + b[i];
  }
}

extern "C" int mblast_run(const mblast_context* ctx, void*, const mblast_tensor* in, int32_t, const mblast_tensor*,
                          int32_t, mblast_tensor* out, int32_t) {
  const long long n = out[0].shape[0];
  const size_t shared = size_t{1} << 30;  // THE BUG: far beyond any GPU's shared memory
  vec_add<<<static_cast<unsigned>((n + 255) / 256), 256, shared, static_cast<cudaStream_t>(ctx->cuda_stream)>>>(
      static_cast<const float*>(in[0].data), static_cast<const float*>(in[1].data), static_cast<float*>(out[0].data), n);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    std::snprintf(g_err, sizeof g_err, "vec_add launch failed: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    return 1;
  }
  std::snprintf(g_err, sizeof g_err, "the oversized launch was accepted");
  return 1;  // either way this candidate fails its launch
}

extern "C" const char* mblast_last_error(void) { return g_err; }
