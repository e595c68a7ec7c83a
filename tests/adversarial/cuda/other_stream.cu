// Adversarial (cuda): computes y = a + b correctly, but on a non-blocking stream of its own,
// and returns without waiting or joining the runner's stream. Timing that only follows the
// runner's stream would see almost nothing; the device-wide sync must count the work.
#include <mblast/abi.h>

#include <cuda_runtime.h>

__global__ void vec_add(const float* a, const float* b, float* y, long long n) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = a[i] + b[i];
}

static cudaStream_t g_side = nullptr;

extern "C" int mblast_run(const mblast_context*, void*, const mblast_tensor* in, int32_t, const mblast_tensor*,
                          int32_t, mblast_tensor* out, int32_t) {
  if (!g_side && cudaStreamCreateWithFlags(&g_side, cudaStreamNonBlocking) != cudaSuccess) return 1;
  const long long n = out[0].shape[0];
  // THE TRICK: not ctx->cuda_stream, and no event back to it
  vec_add<<<static_cast<unsigned>((n + 255) / 256), 256, 0, g_side>>>(
      static_cast<const float*>(in[0].data), static_cast<const float*>(in[1].data), static_cast<float*>(out[0].data), n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
