// Adversarial (cuda): computes y = a + b, but one element becomes NaN.
#include <mblast/abi.h>

#include <cuda_runtime.h>

__global__ void vec_add(const float* a, const float* b, float* y, long long n) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  y[i] = a[i] + b[i];
  if (i == n / 3) y[i] = __int_as_float(0x7fc00000);  // THE BUG: a quiet NaN
}

extern "C" int mblast_run(const mblast_context* ctx, void*, const mblast_tensor* in, int32_t, const mblast_tensor*,
                          int32_t, mblast_tensor* out, int32_t) {
  const long long n = out[0].shape[0];
  vec_add<<<static_cast<unsigned>((n + 255) / 256), 256, 0, static_cast<cudaStream_t>(ctx->cuda_stream)>>>(
      static_cast<const float*>(in[0].data), static_cast<const float*>(in[1].data), static_cast<float*>(out[0].data), n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
