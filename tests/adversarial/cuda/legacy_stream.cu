// Adversarial (cuda): computes y = a + b correctly on the legacy default stream (stream 0), not
// the runner's, and returns without waiting. The timer's device-wide synchronisation must count it.
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
  (void)ctx;
  // THE TRICK: stream 0, not ctx->cuda_stream
  vec_add<<<grid, 256, 0, 0>>>(a, b, y, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
