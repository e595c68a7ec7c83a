// Adversarial (cuda): adds +0.7 and -0.7 of vec_add's tolerance (atol 1e-6 + rtol 1e-6 * |y|)
// on alternate calls. Each run alone passes against the reference; two runs on the same inputs
// differ by 1.4 tolerances.
#include <mblast/abi.h>

#include <cuda_runtime.h>

__global__ void vec_add_jitter(const float* a, const float* b, float* y, long long n, float sign) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float r = a[i] + b[i];
  y[i] = r + sign * 0.7f * (1e-6f + 1e-6f * fabsf(r));  // THE BUG: depends on the call count
}

static long long g_calls = 0;

extern "C" int mblast_run(const mblast_context* ctx, void*, const mblast_tensor* in, int32_t, const mblast_tensor*,
                          int32_t, mblast_tensor* out, int32_t) {
  const float sign = (g_calls++ % 2 == 0) ? 1.0f : -1.0f;
  const long long n = out[0].shape[0];
  vec_add_jitter<<<static_cast<unsigned>((n + 255) / 256), 256, 0, static_cast<cudaStream_t>(ctx->cuda_stream)>>>(
      static_cast<const float*>(in[0].data), static_cast<const float*>(in[1].data), static_cast<float*>(out[0].data), n,
      sign);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
