// 03_linear_residual_layernorm — naive CUDA candidate: out = LayerNorm(x @ W^T + b + residual)
//   over the last dim, eps 1e-5 (the file's constant), two kernels: one thread per element of
//   x @ W^T + b + residual (written to out), then one thread per row normalising it in place.
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

#define EPS 1e-5f

__global__ void linear_residual(const float* __restrict__ x,       // [T, Din]
                                const float* __restrict__ weight,  // [D, Din]
                                const float* __restrict__ bias,    // [D]
                                const float* __restrict__ res,     // [T, D]
                                float* __restrict__ y,             // [T, D]
                                long long T, long long Din, long long D) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (idx >= T * D) return;
  const long long t = idx / D, o = idx % D;
  const float* xt = x + t * Din;
  const float* wo = weight + o * Din;
  float acc = bias[o];
  for (long long k = 0; k < Din; ++k) acc += xt[k] * wo[k];
  y[idx] = acc + res[idx];
}

__global__ void layernorm_rows_inplace(float* __restrict__ y, const float* __restrict__ gamma,
                                       const float* __restrict__ beta, long long rows, long long cols) {
  const long long r = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  float* yr = y + r * cols;
  float sum = 0.0f;
  for (long long j = 0; j < cols; ++j) sum += yr[j];
  const float mean = sum / static_cast<float>(cols);
  float sq = 0.0f;
  for (long long j = 0; j < cols; ++j) sq += (yr[j] - mean) * (yr[j] - mean);
  const float rstd = 1.0f / sqrtf(sq / static_cast<float>(cols) + EPS);
  for (long long j = 0; j < cols; ++j) yr[j] = (yr[j] - mean) * rstd * gamma[j] + beta[j];
}

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
                          const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)state;
  if (!check_call(ctx, n_inputs, 2, n_params, 4, n_outputs, 1)) return -1;
  if (!check_f32(inputs[0], "in0", 2) || !check_f32(inputs[1], "in1", 2) || !check_f32(params[0], "fc.weight", 2) ||
      !check_f32(params[1], "fc.bias", 1) || !check_f32(params[2], "norm.weight", 1) ||
      !check_f32(params[3], "norm.bias", 1) || !check_f32(outputs[0], "out0", 2))
    return -1;
  const long long T = inputs[0].shape[0], Din = inputs[0].shape[1], D = params[0].shape[0];
  if (params[0].shape[1] != Din) FAIL("fc.weight must be [D, %lld]", Din);
  for (int i = 1; i < 4; ++i)
    if (params[i].shape[0] != D) FAIL("fc.bias, norm.weight and norm.bias must have %lld entries", D);
  if (inputs[1].shape[0] != T || inputs[1].shape[1] != D) FAIL("in1 (residual) must be [%lld, %lld]", T, D);
  if (!same_shape(inputs[1], outputs[0])) FAIL("out0 must be [%lld, %lld]", T, D);
  float* y = static_cast<float*>(outputs[0].data);
  linear_residual<<<blocks_for(T * D, 256), 256, 0, stream_of(ctx)>>>(
      static_cast<const float*>(inputs[0].data), static_cast<const float*>(params[0].data),
      static_cast<const float*>(params[1].data), static_cast<const float*>(inputs[1].data), y, T, Din, D);
  if (launched("linear_residual") != 0) return -1;
  layernorm_rows_inplace<<<blocks_for(T, 128), 128, 0, stream_of(ctx)>>>(
      y, static_cast<const float*>(params[2].data), static_cast<const float*>(params[3].data), T, D);
  return launched("layernorm_rows_inplace");
}

extern "C" const char* mblast_last_error(void) { return g_err; }
