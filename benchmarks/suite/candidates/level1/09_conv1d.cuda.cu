// 09_conv1d — naive CUDA candidate: 1D convolution, x [N, C, L], weight [K, C, R], stride 1, zero
//   padding R/2 (the module's kernel // 2), plus bias; one thread per output element (n, k, l),
//   its sum over C x R read straight from global memory.
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

__global__ void conv1d(const float* __restrict__ x,       // [N, C, L]
                       const float* __restrict__ weight,  // [K, C, R]
                       const float* __restrict__ bias,    // [K]
                       float* __restrict__ y,             // [N, K, Lout]
                       long long N, long long C, long long L, long long K, long long R, long long Lout) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (idx >= N * K * Lout) return;
  const long long l = idx % Lout, k = (idx / Lout) % K, n = idx / (Lout * K);
  float acc = bias[k];
  for (long long c = 0; c < C; ++c) {
    const float* xr = x + (n * C + c) * L;
    const float* wr = weight + (k * C + c) * R;
    for (long long r = 0; r < R; ++r) {
      const long long t = l - R / 2 + r;
      if (t >= 0 && t < L) acc += xr[t] * wr[r];
    }
  }
  y[idx] = acc;
}

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
                          const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)state;
  if (!check_call(ctx, n_inputs, 1, n_params, 2, n_outputs, 1)) return -1;
  if (!check_f32(inputs[0], "in0", 3) || !check_f32(params[0], "conv.weight", 3) ||
      !check_f32(params[1], "conv.bias", 1) || !check_f32(outputs[0], "out0", 3))
    return -1;
  const long long N = inputs[0].shape[0], C = inputs[0].shape[1], L = inputs[0].shape[2];
  const long long K = params[0].shape[0], R = params[0].shape[2];
  const long long Lout = L + 2 * (R / 2) - R + 1;
  if (params[0].shape[1] != C)
    FAIL("conv.weight has %lld input channels, in0 has %lld", (long long)params[0].shape[1], C);
  if (params[1].shape[0] != K) FAIL("conv.bias must have %lld entries", K);
  if (Lout <= 0 || outputs[0].shape[0] != N || outputs[0].shape[1] != K || outputs[0].shape[2] != Lout)
    FAIL("out0 must be [%lld, %lld, %lld]", N, K, Lout);
  conv1d<<<blocks_for(N * K * Lout, 256), 256, 0, stream_of(ctx)>>>(
      static_cast<const float*>(inputs[0].data), static_cast<const float*>(params[0].data),
      static_cast<const float*>(params[1].data), static_cast<float*>(outputs[0].data), N, C, L, K, R, Lout);
  return launched("conv1d");
}

extern "C" const char* mblast_last_error(void) { return g_err; }
