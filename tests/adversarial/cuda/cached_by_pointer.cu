// Adversarial (cuda): remembers the input buffer of its first call and the result it computed
// there; whenever it sees that buffer again it replays the saved result instead of computing.
#include <mblast/abi.h>

#include <cuda_runtime.h>

__global__ void vec_add(const float* a, const float* b, float* y, long long n) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = a[i] + b[i];
}

static const void* g_seen_a = nullptr;  // the input pointer of the first call
static float* g_saved = nullptr;        // the result computed for it (device memory)

extern "C" int mblast_run(const mblast_context* ctx, void*, const mblast_tensor* in, int32_t, const mblast_tensor*,
                          int32_t, mblast_tensor* out, int32_t) {
  cudaStream_t stream = static_cast<cudaStream_t>(ctx->cuda_stream);
  if (g_saved && in[0].data == g_seen_a) {
    // THE BUG: same pointer, so "same input": replay the old result
    return cudaMemcpyAsync(out[0].data, g_saved, out[0].nbytes, cudaMemcpyDeviceToDevice, stream) == cudaSuccess ? 0 : 1;
  }
  const long long n = out[0].shape[0];
  vec_add<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(
      static_cast<const float*>(in[0].data), static_cast<const float*>(in[1].data), static_cast<float*>(out[0].data), n);
  if (cudaGetLastError() != cudaSuccess) return 1;
  if (!g_saved) {
    if (cudaMalloc(&g_saved, out[0].nbytes) != cudaSuccess) return 1;
    g_seen_a = in[0].data;
    if (cudaMemcpyAsync(g_saved, out[0].data, out[0].nbytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess) return 1;
  }
  return 0;
}
