// 07_rmsnorm_linear — naive CUDA candidate: out = (x / sqrt(mean(x^2, last dim) + eps) * g) @ W^T
//   for x [T, D], g [D], W [Dout, D], eps 1e-6 (the file's constant); two kernels: one thread per
//   row computes 1 / rms into scratch, then one thread per output element takes the dot product of
//   the normalised row (normalised on the fly) with a row of W.
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

// Scratch device memory for the intermediates, kept in the state that mblast_prepare makes. Its
// size depends on the input shapes, which mblast_prepare does not see, so mblast_run grows it on
// its first call (cudaMalloc; a later call with the same shapes allocates nothing). Nothing in it
// carries over between calls: every call writes what it reads.
struct Scratch {
  void* data = nullptr;
  size_t bytes = 0;
};

extern "C" int mblast_prepare(const mblast_context* ctx, const mblast_tensor* params, int32_t n_params, void** state) {
  (void)ctx, (void)params, (void)n_params;
  *state = new Scratch();
  return 0;
}

extern "C" void mblast_release(const mblast_context* ctx, void* state) {
  (void)ctx;
  Scratch* s = static_cast<Scratch*>(state);
  if (!s) return;
  if (s->data) cudaFree(s->data);
  delete s;
}

// At least `bytes` of scratch, or nullptr with g_err set.
[[maybe_unused]] static float* scratch(void* state, size_t bytes) {
  Scratch* s = static_cast<Scratch*>(state);
  if (!s) {
    std::snprintf(g_err, sizeof g_err, "mblast_run called without the state of mblast_prepare");
    return nullptr;
  }
  if (s->bytes < bytes) {
    if (s->data) cudaFree(s->data);  // only when the shapes grow
    s->data = nullptr;
    s->bytes = 0;
    const cudaError_t e = cudaMalloc(&s->data, bytes);
    if (e != cudaSuccess) {
      std::snprintf(g_err, sizeof g_err, "cudaMalloc(%zu) for scratch failed: %s", bytes, cudaGetErrorString(e));
      s->data = nullptr;
      return nullptr;
    }
    s->bytes = bytes;
  }
  return static_cast<float*>(s->data);
}

#define EPS 1e-6f

__global__ void inv_rms_rows(const float* __restrict__ x, float* __restrict__ inv_rms, long long rows, long long cols) {
  const long long r = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  const float* xr = x + r * cols;
  float sq = 0.0f;
  for (long long j = 0; j < cols; ++j) sq += xr[j] * xr[j];
  inv_rms[r] = 1.0f / sqrtf(sq / static_cast<float>(cols) + EPS);
}

__global__ void normed_linear(const float* __restrict__ x, const float* __restrict__ inv_rms,
                              const float* __restrict__ g, const float* __restrict__ weight, float* __restrict__ y,
                              long long T, long long D, long long Dout) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (idx >= T * Dout) return;
  const long long t = idx / Dout, o = idx % Dout;
  const float* xt = x + t * D;
  const float* wo = weight + o * D;
  const float s = inv_rms[t];
  float acc = 0.0f;
  for (long long k = 0; k < D; ++k) acc += (xt[k] * s * g[k]) * wo[k];
  y[idx] = acc;
}

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
                          const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  if (!check_call(ctx, n_inputs, 1, n_params, 2, n_outputs, 1)) return -1;
  if (!check_f32(inputs[0], "in0", 2) || !check_f32(params[0], "norm_weight", 1) ||
      !check_f32(params[1], "proj.weight", 2) || !check_f32(outputs[0], "out0", 2))
    return -1;
  const long long T = inputs[0].shape[0], D = inputs[0].shape[1], Dout = params[1].shape[0];
  if (params[0].shape[0] != D) FAIL("norm_weight must have %lld entries", D);
  if (params[1].shape[1] != D) FAIL("proj.weight must be [Dout, %lld]", D);
  if (outputs[0].shape[0] != T || outputs[0].shape[1] != Dout) FAIL("out0 must be [%lld, %lld]", T, Dout);
  float* inv_rms = scratch(state, static_cast<size_t>(T) * sizeof(float));
  if (!inv_rms) return -1;
  const float* x = static_cast<const float*>(inputs[0].data);
  inv_rms_rows<<<blocks_for(T, 128), 128, 0, stream_of(ctx)>>>(x, inv_rms, T, D);
  if (launched("inv_rms_rows") != 0) return -1;
  normed_linear<<<blocks_for(T * Dout, 256), 256, 0, stream_of(ctx)>>>(
      x, inv_rms, static_cast<const float*>(params[0].data), static_cast<const float*>(params[1].data),
      static_cast<float*>(outputs[0].data), T, D, Dout);
  return launched("normed_linear");
}

extern "C" const char* mblast_last_error(void) { return g_err; }
