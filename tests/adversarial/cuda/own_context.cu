// Adversarial (cuda): computes y = a + b correctly on the runner's stream, then creates a CUDA
// context of its own (driver API, cuCtxCreate) and leaves it current, as a candidate that runs
// its work there would: cuCtxSynchronize on the runner's context does not wait for another
// context. Must be refused with the reason (launch_failed), never timed.
#include <dlfcn.h>
#include <mblast/abi.h>

#include <cuda_runtime.h>

__global__ void vec_add(const float* a, const float* b, float* y, long long n) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = a[i] + b[i];
}

extern "C" int mblast_run(const mblast_context* ctx, void*, const mblast_tensor* in, int32_t, const mblast_tensor*,
                          int32_t, mblast_tensor* out, int32_t) {
  const float* a = static_cast<const float*>(in[0].data);
  const float* b = static_cast<const float*>(in[1].data);
  float* y = static_cast<float*>(out[0].data);
  const long long n = out[0].shape[0];
  const unsigned grid = static_cast<unsigned>((n + 255) / 256);
  cudaStream_t s = static_cast<cudaStream_t>(ctx->cuda_stream);
  vec_add<<<grid, 256, 0, s>>>(a, b, y, n);
  if (cudaGetLastError() != cudaSuccess) return 1;
  // THE TRICK: a second context, made current on the worker's thread
  void* cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  using Create = int (*)(void**, unsigned, int);
  auto create = cu ? reinterpret_cast<Create>(dlsym(cu, "cuCtxCreate_v2")) : nullptr;
  void* mine = nullptr;
  if (!create || create(&mine, 0, ctx->cuda_device) != 0) return 1;
  return 0;
}
