// Adversarial (cuda): computes y = a + b correctly, then overwrites input a in place (it swaps a
// and b, so every later call still gets the exact sum: only the input hashes can tell).
#include <mblast/abi.h>

#include <cuda_runtime.h>

__global__ void vec_add_clobber(float* a, float* b, float* y, long long n) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float va = a[i], vb = b[i];
  y[i] = va + vb;
  a[i] = vb;  // THE BUG: the inputs are not ours to write
  b[i] = va;
}

extern "C" int mblast_run(const mblast_context* ctx, void*, const mblast_tensor* in, int32_t, const mblast_tensor*,
                          int32_t, mblast_tensor* out, int32_t) {
  const long long n = out[0].shape[0];
  vec_add_clobber<<<static_cast<unsigned>((n + 255) / 256), 256, 0, static_cast<cudaStream_t>(ctx->cuda_stream)>>>(
      static_cast<float*>(in[0].data), static_cast<float*>(in[1].data), static_cast<float*>(out[0].data), n);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
