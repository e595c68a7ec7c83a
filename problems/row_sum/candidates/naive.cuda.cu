// row_sum — naive CUDA candidate: one thread per row, y[i] = sum_j x[i, j] in one sequential pass.
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

__global__ void row_sum(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols) {
  const long long r = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  const float* xr = x + r * cols;
  float acc = 0.0f;
  for (long long j = 0; j < cols; ++j) acc += xr[j];
  y[r] = acc;
}

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs,
                          int32_t n_inputs, const mblast_tensor* params, int32_t n_params,
                          mblast_tensor* outputs, int32_t n_outputs) {
  (void)state;
  (void)params;
  if (!ctx || ctx->backend != MBLAST_BACKEND_CUDA) FAIL("mblast_context is not a CUDA context");
  if (n_inputs != 1 || n_params != 0 || n_outputs != 1)
    FAIL("expected 1 input, 0 parameters, 1 output; got %d, %d, %d", (int)n_inputs, (int)n_params, (int)n_outputs);
  if (!check_tensor(inputs[0], "x", 2) || !check_tensor(outputs[0], "y", 1)) return -1;
  const long long rows = inputs[0].shape[0], cols = inputs[0].shape[1];
  if (outputs[0].shape[0] != rows) FAIL("y has %lld entries, x has %lld rows", (long long)outputs[0].shape[0], rows);
  const int block = 128;
  const unsigned grid = static_cast<unsigned>((rows + block - 1) / block);
  row_sum<<<grid, block, 0, static_cast<cudaStream_t>(ctx->cuda_stream)>>>(
      static_cast<const float*>(inputs[0].data), static_cast<float*>(outputs[0].data), rows, cols);
  return launched("row_sum");
}

extern "C" const char* mblast_last_error(void) { return g_err; }
