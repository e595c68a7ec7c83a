// honest_until_timed (cuda) — a correct vec_add on the first 6 calls (the verification runs: 3
// seeds x 2 runs), then returns at once on every later call. Every timed call's outputs are
// poisoned before it and fingerprinted after it, so mblast must report "unwritten_output".
#include <mblast/abi.h>

#include <cuda_runtime.h>

__global__ void vec_add(const float* a, const float* b, float* y, long long n) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = a[i] + b[i];
}

static int g_calls = 0;

extern "C" int mblast_run(const mblast_context* ctx, void*, const mblast_tensor* in, int32_t, const mblast_tensor*,
                          int32_t, mblast_tensor* out, int32_t) {
  if (++g_calls > 6) return 0;  // THE CHEAT: verified by now, "nobody checks the timed calls"
  const long long n = out[0].shape[0];
  vec_add<<<static_cast<unsigned>((n + 255) / 256), 256, 0, static_cast<cudaStream_t>(ctx->cuda_stream)>>>(
      static_cast<const float*>(in[0].data), static_cast<const float*>(in[1].data), static_cast<float*>(out[0].data), n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
