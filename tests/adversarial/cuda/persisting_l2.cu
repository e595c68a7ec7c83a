// Adversarial (cuda): computes y = a + b correctly, but first sets the persisting-L2 limit to the
// device's maximum and an access-policy window over its inputs on the runner's stream, so that
// they stay in L2 across the runner's cache flush. Must be refused (launch_failed), never timed.
#include <mblast/abi.h>

#include <algorithm>

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
  cudaStream_t s = static_cast<cudaStream_t>(ctx->cuda_stream);
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, ctx->cuda_device) != cudaSuccess) return 1;
  if (prop.persistingL2CacheMaxSize > 0) {
    // THE TRICK: a persisting set-aside and a window that marks the inputs persisting
    cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, static_cast<size_t>(prop.persistingL2CacheMaxSize));
    cudaStreamAttrValue attr{};
    attr.accessPolicyWindow.base_ptr = const_cast<float*>(a);
    attr.accessPolicyWindow.num_bytes = std::min<size_t>(in[0].nbytes, static_cast<size_t>(prop.accessPolicyMaxWindowSize));
    attr.accessPolicyWindow.hitRatio = 1.0f;
    attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
    attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &attr);
  }
  vec_add<<<grid, 256, 0, s>>>(a, b, y, n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
