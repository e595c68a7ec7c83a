// Adversarial (cuda): computes y = a + b and also writes 256 elements past the end of y.
#include <mblast/abi.h>

#include <cuda_runtime.h>

__global__ void vec_add_unchecked(const float* a, const float* b, float* y, long long n, long long extra) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = a[i] + b[i];
  else if (i < n + extra) y[i] = 0.0f;  // THE BUG: past the end of the output buffer
}

extern "C" int mblast_run(const mblast_context* ctx, void*, const mblast_tensor* in, int32_t, const mblast_tensor*,
                          int32_t, mblast_tensor* out, int32_t) {
  const long long n = out[0].shape[0], extra = 256;
  vec_add_unchecked<<<static_cast<unsigned>((n + extra + 255) / 256), 256, 0,
                      static_cast<cudaStream_t>(ctx->cuda_stream)>>>(
      static_cast<const float*>(in[0].data), static_cast<const float*>(in[1].data), static_cast<float*>(out[0].data), n,
      extra);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
