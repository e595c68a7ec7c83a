// matmul — naive CUDA candidate: one thread per output element, c[m, n] = sum_k a[m, k] * w[k, n]
//   (a [M, K], w [K, N] row-major, fp32 throughout).
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

__global__ void matmul(const float* __restrict__ a, const float* __restrict__ w, float* __restrict__ c, int M,
                       int N, int K) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  const int m = blockIdx.y * blockDim.y + threadIdx.y;
  if (m >= M || n >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += a[static_cast<long long>(m) * K + k] * w[static_cast<long long>(k) * N + n];
  c[static_cast<long long>(m) * N + n] = acc;
}

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs,
                          int32_t n_inputs, const mblast_tensor* params, int32_t n_params,
                          mblast_tensor* outputs, int32_t n_outputs) {
  (void)state;
  if (!ctx || ctx->backend != MBLAST_BACKEND_CUDA) FAIL("mblast_context is not a CUDA context");
  if (n_inputs != 1 || n_params != 1 || n_outputs != 1)
    FAIL("expected 1 input, 1 parameter, 1 output; got %d, %d, %d", (int)n_inputs, (int)n_params, (int)n_outputs);
  if (!check_tensor(inputs[0], "a", 2) || !check_tensor(params[0], "w", 2) || !check_tensor(outputs[0], "c", 2))
    return -1;
  const long long M = inputs[0].shape[0], K = inputs[0].shape[1], N = params[0].shape[1];
  if (params[0].shape[0] != K) FAIL("w has %lld rows, a has %lld columns", (long long)params[0].shape[0], K);
  if (outputs[0].shape[0] != M || outputs[0].shape[1] != N) FAIL("c must be [%lld, %lld]", M, N);
  if (M > 0x7fffffff || N > 0x7fffffff || K > 0x7fffffff) FAIL("dimensions too large for this kernel");
  const dim3 block(16, 16);
  const dim3 grid(static_cast<unsigned>((N + 15) / 16), static_cast<unsigned>((M + 15) / 16));
  matmul<<<grid, block, 0, static_cast<cudaStream_t>(ctx->cuda_stream)>>>(
      static_cast<const float*>(inputs[0].data), static_cast<const float*>(params[0].data),
      static_cast<float*>(outputs[0].data), static_cast<int>(M), static_cast<int>(N), static_cast<int>(K));
  return launched("matmul");
}

extern "C" const char* mblast_last_error(void) { return g_err; }
