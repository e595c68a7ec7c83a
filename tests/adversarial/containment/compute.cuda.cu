// The correct part of a containment candidate for cuda: vec_add, one thread per element; the
// misdeed (the test puts it before this) runs once, on the first call (host code, after cuInit).
#include <mblast/abi.h>

#include <cuda_runtime.h>

__global__ void vec_add(const float* a, const float* b, float* y, long long n) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = a[i] + b[i];
}

extern "C" int mblast_run(const mblast_context* ctx, void*, const mblast_tensor* in, int32_t, const mblast_tensor*, int32_t,
                          mblast_tensor* out, int32_t) {
  static bool done = false;
  if (!done) done = true, misdeed();
  const long long n = out[0].shape[0];
  const unsigned blocks = static_cast<unsigned>((n + 255) / 256);
  vec_add<<<blocks, 256, 0, static_cast<cudaStream_t>(ctx->cuda_stream)>>>(static_cast<const float*>(in[0].data),
                                                                           static_cast<const float*>(in[1].data),
                                                                           static_cast<float*>(out[0].data), n);
  return cudaGetLastError() == cudaSuccess ? 0 : -1;
}
