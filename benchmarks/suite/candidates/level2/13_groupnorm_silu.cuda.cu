// 13_groupnorm_silu — naive CUDA candidate: SiLU(GroupNorm(x)) on x [N, C, H, W], affine parameters,
//   eps 1e-5: each (n, group) spans C/G contiguous channel planes; y = (x - mean) / sqrt(var + eps)
//   * weight[c] + bias[c] with the group's biased variance, then y sigmoid(y). One thread per (n, group),
//   three passes.
//   The group count G is the file's constructor argument GROUPS, which no tensor carries: it is
//   looked up from the channel count (8 groups for 32 channels at the small size, 32 for 256 at
//   the full size); other channel counts are refused.
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

static long long groups_for(long long channels) { return channels == 32 ? 8 : channels == 256 ? 32 : 0; }

__global__ void groupnorm_silu(const float* __restrict__ x, const float* __restrict__ weight,
                               const float* __restrict__ bias, float* __restrict__ y, long long N, long long C,
                               long long G, long long HW) {
  const long long ng = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (ng >= N * G) return;
  const long long cpg = C / G, count = cpg * HW;
  const long long c0 = (ng % G) * cpg;
  const float* xg = x + ng * count;  // the group's channels are contiguous in NCHW
  float* yg = y + ng * count;
  float sum = 0.0f;
  for (long long i = 0; i < count; ++i) sum += xg[i];
  const float mean = sum / static_cast<float>(count);
  float sq = 0.0f;
  for (long long i = 0; i < count; ++i) sq += (xg[i] - mean) * (xg[i] - mean);
  const float rstd = 1.0f / sqrtf(sq / static_cast<float>(count) + EPS);
  for (long long i = 0; i < count; ++i) {
    const long long c = c0 + i / HW;
    const float v = (xg[i] - mean) * rstd * weight[c] + bias[c];
    yg[i] = v / (1.0f + expf(-v));
  }
}

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
                          const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)state;
  if (!check_call(ctx, n_inputs, 1, n_params, 2, n_outputs, 1)) return -1;
  if (!check_f32(inputs[0], "in0", 4) || !check_f32(params[0], "norm.weight", 1) ||
      !check_f32(params[1], "norm.bias", 1) || !check_f32(outputs[0], "out0", 4))
    return -1;
  const long long N = inputs[0].shape[0], C = inputs[0].shape[1], HW = inputs[0].shape[2] * inputs[0].shape[3];
  const long long G = groups_for(C);
  if (G == 0) FAIL("no known group count for %lld channels (the suite uses 8 groups of 32, 32 of 256)", C);
  if (params[0].shape[0] != C || params[1].shape[0] != C) FAIL("norm.weight and norm.bias must have %lld entries", C);
  if (!same_shape(inputs[0], outputs[0])) FAIL("out0 must have the shape of in0");
  groupnorm_silu<<<blocks_for(N * G, 64), 64, 0, stream_of(ctx)>>>(
      static_cast<const float*>(inputs[0].data), static_cast<const float*>(params[0].data),
      static_cast<const float*>(params[1].data), static_cast<float*>(outputs[0].data), N, C, G, HW);
  return launched("groupnorm_silu");
}

extern "C" const char* mblast_last_error(void) { return g_err; }
