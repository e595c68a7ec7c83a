// Adversarial (cuda): does not compile (an undeclared identifier and a type error in the kernel).
#include <mblast/abi.h>

#include <cuda_runtime.h>

__global__ void vec_add(const float* a, const float* b, float* y, long long n) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = a[i] + b[i] + undeclared_bias;  // THE BUG
  float4 v = a;                                     // and a type error
}

extern "C" int mblast_run(const mblast_context* ctx, void*, const mblast_tensor* in, int32_t, const mblast_tensor*,
                          int32_t, mblast_tensor* out, int32_t) {
  vec_add<<<1, 1, 0, static_cast<cudaStream_t>(ctx->cuda_stream)>>>(nullptr, nullptr, nullptr, 0)
  return 0;
}
