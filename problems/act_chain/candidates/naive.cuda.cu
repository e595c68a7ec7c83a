// act_chain — naive CUDA candidate: one thread per element,
//   y = tanh(leaky_relu(x, 0.1) * scale[col]) + 0.5 * x.
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

__global__ void act_chain(const float* __restrict__ x, const float* __restrict__ scale, float* __restrict__ y,
                          long long n, long long cols) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  const float lrelu = v > 0.0f ? v : 0.1f * v;
  y[i] = tanhf(lrelu * scale[i % cols]) + 0.5f * v;
}

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs,
                          int32_t n_inputs, const mblast_tensor* params, int32_t n_params,
                          mblast_tensor* outputs, int32_t n_outputs) {
  (void)state;
  if (!ctx || ctx->backend != MBLAST_BACKEND_CUDA) FAIL("mblast_context is not a CUDA context");
  if (n_inputs != 1 || n_params != 1 || n_outputs != 1)
    FAIL("expected 1 input, 1 parameter, 1 output; got %d, %d, %d", (int)n_inputs, (int)n_params, (int)n_outputs);
  if (!check_tensor(inputs[0], "x", 2) || !check_tensor(params[0], "scale", 1) || !check_tensor(outputs[0], "y", 2))
    return -1;
  const long long cols = inputs[0].shape[1];
  if (params[0].shape[0] != cols)
    FAIL("scale has %lld entries, x has %lld columns", (long long)params[0].shape[0], cols);
  if (outputs[0].shape[0] != inputs[0].shape[0] || outputs[0].shape[1] != cols) FAIL("x and y differ in shape");
  const long long n = static_cast<long long>(outputs[0].nbytes / sizeof(float));
  const int block = 256;
  const unsigned grid = static_cast<unsigned>((n + block - 1) / block);
  act_chain<<<grid, block, 0, static_cast<cudaStream_t>(ctx->cuda_stream)>>>(
      static_cast<const float*>(inputs[0].data), static_cast<const float*>(params[0].data),
      static_cast<float*>(outputs[0].data), n, cols);
  return launched("act_chain");
}

extern "C" const char* mblast_last_error(void) { return g_err; }
