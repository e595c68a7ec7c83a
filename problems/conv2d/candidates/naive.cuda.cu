// conv2d — naive CUDA candidate: direct convolution, one thread per output element (n, k, p, q);
//   NCHW input, KCRS weight, stride 1, zero padding 1, plus bias.
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/abi.h>

#include <cuda_runtime.h>

#include <cstdio>

static char g_err[512];

#define FAIL(...)                                    \
  do {                                               \
    std::snprintf(g_err, sizeof g_err, __VA_ARGS__); \
    return -1;                                       \
  } while (0)

// Checks one tensor's dtype (f32), rank and byte size; false with g_err set on a mismatch.
static bool check_tensor(const mblast_tensor& t, const char* what, int ndim) {
  size_t n = 1;
  for (int d = 0; d < t.ndim && d < MBLAST_MAX_DIMS; ++d) n *= t.shape[d] > 0 ? static_cast<size_t>(t.shape[d]) : 0;
  if (t.dtype != MBLAST_F32 || t.ndim != ndim || n == 0 || t.nbytes != n * sizeof(float) || !t.data) {
    std::snprintf(g_err, sizeof g_err, "%s: expected a non-empty f32 tensor of %d dims", what, ndim);
    return false;
  }
  return true;
}

// After a launch: a bad configuration or a broken context turns into a non-zero return.
static int launched(const char* kernel) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) FAIL("launching %s failed: %s (%s)", kernel, cudaGetErrorString(e), cudaGetErrorName(e));
  return 0;
}

__global__ void conv2d(const float* __restrict__ x,       // [N, C, H, W]
                       const float* __restrict__ weight,  // [K, C, R, S]
                       const float* __restrict__ bias,    // [K]
                       float* __restrict__ y,             // [N, K, P, Q]
                       int N, int C, int H, int W, int K, int R, int S, int P, int Q) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (idx >= static_cast<long long>(N) * K * P * Q) return;
  const int q = static_cast<int>(idx % Q);
  const int p = static_cast<int>((idx / Q) % P);
  const int k = static_cast<int>((idx / (static_cast<long long>(Q) * P)) % K);
  const int n = static_cast<int>(idx / (static_cast<long long>(Q) * P * K));
  float acc = bias[k];
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r) {
      const int h = p - 1 + r;  // stride 1, padding 1
      if (h < 0 || h >= H) continue;
      for (int s = 0; s < S; ++s) {
        const int w = q - 1 + s;
        if (w < 0 || w >= W) continue;
        acc += x[((static_cast<long long>(n) * C + c) * H + h) * W + w] *
               weight[((static_cast<long long>(k) * C + c) * R + r) * S + s];
      }
    }
  y[idx] = acc;
}

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs,
                          int32_t n_inputs, const mblast_tensor* params, int32_t n_params,
                          mblast_tensor* outputs, int32_t n_outputs) {
  (void)state;
  if (!ctx || ctx->backend != MBLAST_BACKEND_CUDA) FAIL("mblast_context is not a CUDA context");
  if (n_inputs != 1 || n_params != 2 || n_outputs != 1)
    FAIL("expected 1 input, 2 parameters, 1 output; got %d, %d, %d", (int)n_inputs, (int)n_params, (int)n_outputs);
  if (!check_tensor(inputs[0], "x", 4) || !check_tensor(params[0], "weight", 4) || !check_tensor(params[1], "bias", 1) ||
      !check_tensor(outputs[0], "y", 4))
    return -1;
  const long long N = inputs[0].shape[0], C = inputs[0].shape[1], H = inputs[0].shape[2], W = inputs[0].shape[3];
  const long long K = params[0].shape[0], R = params[0].shape[2], S = params[0].shape[3];
  const long long P = H + 2 - R + 1, Q = W + 2 - S + 1;  // stride 1, padding 1
  if (params[0].shape[1] != C) FAIL("weight has %lld input channels, x has %lld", (long long)params[0].shape[1], C);
  if (params[1].shape[0] != K) FAIL("bias has %lld entries, weight has %lld filters", (long long)params[1].shape[0], K);
  if (P <= 0 || Q <= 0 || outputs[0].shape[0] != N || outputs[0].shape[1] != K || outputs[0].shape[2] != P ||
      outputs[0].shape[3] != Q)
    FAIL("y must be [%lld, %lld, %lld, %lld]", N, K, P, Q);
  const long long dims[9] = {N, C, H, W, K, R, S, P, Q};
  for (long long d : dims)
    if (d > 0x7fffffff) FAIL("dimensions too large for this kernel");
  const long long total = N * K * P * Q;
  const int block = 256;
  const unsigned grid = static_cast<unsigned>((total + block - 1) / block);
  conv2d<<<grid, block, 0, static_cast<cudaStream_t>(ctx->cuda_stream)>>>(
      static_cast<const float*>(inputs[0].data), static_cast<const float*>(params[0].data),
      static_cast<const float*>(params[1].data), static_cast<float*>(outputs[0].data), static_cast<int>(N),
      static_cast<int>(C), static_cast<int>(H), static_cast<int>(W), static_cast<int>(K), static_cast<int>(R),
      static_cast<int>(S), static_cast<int>(P), static_cast<int>(Q));
  return launched("conv2d");
}

extern "C" const char* mblast_last_error(void) { return g_err; }
