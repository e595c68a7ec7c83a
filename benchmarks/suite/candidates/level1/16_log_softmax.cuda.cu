// 16_log_softmax — naive CUDA candidate: log-softmax over the last dim of x [rows, cols],
//   y = x - max - log(sum exp(x - max)); one thread per row, three passes over the row, the sum
//   in double.
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/abi.h>

#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

static char g_err[512];

#define FAIL(...)                                    \
  do {                                               \
    std::snprintf(g_err, sizeof g_err, __VA_ARGS__); \
    return -1;                                       \
  } while (0)

// Checks the context and the tensor counts; false with g_err set on a mismatch.
[[maybe_unused]] static bool check_call(const mblast_context* ctx, int32_t n_in, int want_in, int32_t n_par,
                                        int want_par, int32_t n_out, int want_out) {
  if (!ctx || ctx->backend != MBLAST_BACKEND_CUDA) {
    std::snprintf(g_err, sizeof g_err, "mblast_context is not a CUDA context");
    return false;
  }
  if (n_in != want_in || n_par != want_par || n_out != want_out) {
    std::snprintf(g_err, sizeof g_err, "expected %d inputs, %d parameters, %d outputs; got %d, %d, %d", want_in,
                  want_par, want_out, static_cast<int>(n_in), static_cast<int>(n_par), static_cast<int>(n_out));
    return false;
  }
  return true;
}

// Checks a tensor's name, dtype (f32), rank and byte size; false with g_err set on a mismatch.
[[maybe_unused]] static bool check_f32(const mblast_tensor& t, const char* name, int ndim) {
  if (t.name && std::strcmp(t.name, name) != 0) {
    std::snprintf(g_err, sizeof g_err, "expected tensor '%s' in this position, got '%s'", name, t.name);
    return false;
  }
  size_t n = 1;
  for (int d = 0; d < t.ndim && d < MBLAST_MAX_DIMS; ++d) n *= t.shape[d] > 0 ? static_cast<size_t>(t.shape[d]) : 0;
  if (t.dtype != MBLAST_F32 || t.ndim != ndim || n == 0 || t.nbytes != n * sizeof(float) || !t.data) {
    std::snprintf(g_err, sizeof g_err, "%s: expected a non-empty f32 tensor of %d dims", name, ndim);
    return false;
  }
  return true;
}

// Checks that a tensor has the given name (for buffers the kernels do not read).
[[maybe_unused]] static bool check_name(const mblast_tensor& t, const char* name) {
  if (!t.name || std::strcmp(t.name, name) == 0) return true;
  std::snprintf(g_err, sizeof g_err, "expected tensor '%s' in this position, got '%s'", name, t.name);
  return false;
}

// True when a and b have the same rank and dims.
[[maybe_unused]] static bool same_shape(const mblast_tensor& a, const mblast_tensor& b) {
  if (a.ndim != b.ndim) return false;
  for (int d = 0; d < a.ndim && d < MBLAST_MAX_DIMS; ++d)
    if (a.shape[d] != b.shape[d]) return false;
  return true;
}

[[maybe_unused]] static cudaStream_t stream_of(const mblast_context* ctx) {
  return static_cast<cudaStream_t>(ctx->cuda_stream);
}

// After a launch: a bad configuration or a broken context turns into a non-zero return.
[[maybe_unused]] static int launched(const char* kernel) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) FAIL("launching %s failed: %s (%s)", kernel, cudaGetErrorString(e), cudaGetErrorName(e));
  return 0;
}

// Blocks of `block` threads covering n threads.
[[maybe_unused]] static unsigned blocks_for(long long n, int block) {
  return static_cast<unsigned>((n + block - 1) / block);
}

__global__ void log_softmax_rows(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols) {
  const long long r = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  const float* xr = x + r * cols;
  float* yr = y + r * cols;
  float m = -INFINITY;
  for (long long j = 0; j < cols; ++j) m = fmaxf(m, xr[j]);
  // A float sum of 32768 terms drifts by up to 6e-5 in log(sum), beyond the tolerance for
  // outputs near 0: the sum is kept in double.
  double sum = 0.0;
  for (long long j = 0; j < cols; ++j) sum += expf(xr[j] - m);
  const float log_sum = static_cast<float>(log(sum));
  for (long long j = 0; j < cols; ++j) yr[j] = xr[j] - m - log_sum;
}

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
                          const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)state, (void)params;
  if (!check_call(ctx, n_inputs, 1, n_params, 0, n_outputs, 1)) return -1;
  if (!check_f32(inputs[0], "in0", 2) || !check_f32(outputs[0], "out0", 2)) return -1;
  if (!same_shape(inputs[0], outputs[0])) FAIL("out0 must have the shape of in0");
  const long long rows = inputs[0].shape[0], cols = inputs[0].shape[1];
  log_softmax_rows<<<blocks_for(rows, 128), 128, 0, stream_of(ctx)>>>(
      static_cast<const float*>(inputs[0].data), static_cast<float*>(outputs[0].data), rows, cols);
  return launched("log_softmax_rows");
}

extern "C" const char* mblast_last_error(void) { return g_err; }
