// Adversarial (cuda): the fp32 matmul c = a @ w computed with fp16 inputs and fp16 products
// (accumulated in fp32). Fast-looking, but the rounding of the operands and products is far
// beyond the problem's 1e-4 tolerance on the signed seeds.
#include <mblast/abi.h>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

__global__ void matmul_fp16(const float* a, const float* w, float* c, int M, int N, int K) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  const int m = blockIdx.y * blockDim.y + threadIdx.y;
  if (m >= M || n >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) {
    const __half x = __float2half(a[static_cast<long long>(m) * K + k]);  // THE BUG: fp16 operands
    const __half y = __float2half(w[static_cast<long long>(k) * N + n]);
    acc += __half2float(__hmul(x, y));                                    // and fp16 products
  }
  c[static_cast<long long>(m) * N + n] = acc;
}

extern "C" int mblast_run(const mblast_context* ctx, void*, const mblast_tensor* in, int32_t, const mblast_tensor* par,
                          int32_t, mblast_tensor* out, int32_t) {
  const int M = static_cast<int>(in[0].shape[0]), K = static_cast<int>(in[0].shape[1]);
  const int N = static_cast<int>(par[0].shape[1]);
  const dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);
  matmul_fp16<<<grid, block, 0, static_cast<cudaStream_t>(ctx->cuda_stream)>>>(
      static_cast<const float*>(in[0].data), static_cast<const float*>(par[0].data), static_cast<float*>(out[0].data), M,
      N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
