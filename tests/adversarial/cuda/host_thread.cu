// Adversarial (cuda): returns 0 at once and launches the kernel 100 ms later from a detached
// host thread. By the time the runner has synchronised and read y, nothing has been written.
#include <mblast/abi.h>

#include <cuda_runtime.h>

#include <chrono>
#include <thread>

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
  cudaStream_t stream = static_cast<cudaStream_t>(ctx->cuda_stream);
  // THE BUG: the work happens after mblast_run has returned
  std::thread([=] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    vec_add<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(a, b, y, n);
  }).detach();
  return 0;
}
