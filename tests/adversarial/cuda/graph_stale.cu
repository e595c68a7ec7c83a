// Adversarial (cuda): captures its launch into a CUDA graph on the first call and replays that
// graph on every later call, on whatever buffers it is given: the graph still holds the first
// call's pointers, so the outputs of the other rotating buffer sets are never written.
#include <mblast/abi.h>

#include <cuda_runtime.h>

__global__ void vec_add(const float* a, const float* b, float* y, long long n) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = a[i] + b[i];
}

static cudaGraphExec_t g_exec = nullptr;

extern "C" int mblast_run(const mblast_context* ctx, void*, const mblast_tensor* in, int32_t, const mblast_tensor*,
                          int32_t, mblast_tensor* out, int32_t) {
  const float* a = static_cast<const float*>(in[0].data);
  const float* b = static_cast<const float*>(in[1].data);
  float* y = static_cast<float*>(out[0].data);
  const long long n = out[0].shape[0];
  const unsigned grid = static_cast<unsigned>((n + 255) / 256);
  cudaStream_t s = static_cast<cudaStream_t>(ctx->cuda_stream);
  if (!g_exec) {
    cudaGraph_t g = nullptr;
    if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return 1;
    vec_add<<<grid, 256, 0, s>>>(a, b, y, n);
    if (cudaStreamEndCapture(s, &g) != cudaSuccess) return 1;
    if (cudaGraphInstantiate(&g_exec, g, 0) != cudaSuccess) return 1;
  }
  // THE TRICK: the replay ignores this call's a, b and y
  return cudaGraphLaunch(g_exec, s) == cudaSuccess ? 0 : 1;
}
