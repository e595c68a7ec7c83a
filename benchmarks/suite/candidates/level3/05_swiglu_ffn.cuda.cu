// 05_swiglu_ffn — naive CUDA candidate: y = x + W_down(silu(W_gate h) * (W_up h)) with
//   h = x / sqrt(mean(x^2, last dim) + eps) * g, eps 1e-6 (the file's constant), bias-free
//   projections. Three kernels: one thread per row for the RMSNorm, one thread per hidden element
//   (both dot products, the gate and the product), one thread per output element for the down
//   projection and the residual; h and the hidden activation in scratch.
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

// The parameter called `name`, checked as an f32 tensor of `ndim` dims; nullptr with g_err set.
[[maybe_unused]] static const mblast_tensor* find_param(const mblast_tensor* params, int32_t n_params,
                                                        const char* name, int ndim) {
  for (int32_t i = 0; i < n_params; ++i)
    if (params[i].name && std::strcmp(params[i].name, name) == 0)
      return check_f32(params[i], name, ndim) ? &params[i] : nullptr;
  std::snprintf(g_err, sizeof g_err, "no parameter named '%s'", name);
  return nullptr;
}

[[maybe_unused]] static const float* f32(const mblast_tensor* t) { return static_cast<const float*>(t->data); }

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

__global__ void rmsnorm_rows(const float* __restrict__ x, const float* __restrict__ g, float* __restrict__ h,
                             long long rows, long long cols) {
  const long long r = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  const float* xr = x + r * cols;
  float sq = 0.0f;
  for (long long j = 0; j < cols; ++j) sq += xr[j] * xr[j];
  const float inv_rms = 1.0f / sqrtf(sq / static_cast<float>(cols) + EPS);
  for (long long j = 0; j < cols; ++j) h[r * cols + j] = xr[j] * inv_rms * g[j];
}

// a[t, f] = silu(h[t] . wg[f]) * (h[t] . wu[f]).
__global__ void gate_up(const float* __restrict__ h, const float* __restrict__ wg, const float* __restrict__ wu,
                        float* __restrict__ a, long long T, long long D, long long F) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (idx >= T * F) return;
  const long long t = idx / F, f = idx % F;
  const float* ht = h + t * D;
  float gate = 0.0f, up = 0.0f;
  for (long long k = 0; k < D; ++k) {
    gate += ht[k] * wg[f * D + k];
    up += ht[k] * wu[f * D + k];
  }
  a[idx] = gate / (1.0f + expf(-gate)) * up;
}

// y[t, o] = x[t, o] + a[t] . wd[o].
__global__ void down_residual(const float* __restrict__ a, const float* __restrict__ wd, const float* __restrict__ x,
                              float* __restrict__ y, long long T, long long F, long long D) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (idx >= T * D) return;
  const long long t = idx / D, o = idx % D;
  float acc = 0.0f;
  for (long long k = 0; k < F; ++k) acc += a[t * F + k] * wd[o * F + k];
  y[idx] = x[idx] + acc;
}

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
                          const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  if (!check_call(ctx, n_inputs, 1, n_params, 4, n_outputs, 1)) return -1;
  if (!check_f32(inputs[0], "in0", 2) || !check_f32(outputs[0], "out0", 2)) return -1;
  if (!same_shape(inputs[0], outputs[0])) FAIL("out0 must have the shape of in0");
  const long long T = inputs[0].shape[0], D = inputs[0].shape[1];
  const mblast_tensor* g = find_param(params, n_params, "norm_weight", 1);
  const mblast_tensor* wg = find_param(params, n_params, "w_gate.weight", 2);
  const mblast_tensor* wu = find_param(params, n_params, "w_up.weight", 2);
  const mblast_tensor* wd = find_param(params, n_params, "w_down.weight", 2);
  if (!g || !wg || !wu || !wd) return -1;
  const long long F = wg->shape[0];
  if (g->shape[0] != D) FAIL("norm_weight must have %lld entries", D);
  if (wg->shape[1] != D || wu->shape[0] != F || wu->shape[1] != D) FAIL("w_gate and w_up must be [%lld, %lld]", F, D);
  if (wd->shape[0] != D || wd->shape[1] != F) FAIL("w_down must be [%lld, %lld]", D, F);
  float* h = scratch(state, static_cast<size_t>(T * D + T * F) * sizeof(float));
  if (!h) return -1;
  float* a = h + T * D;
  const float* x = static_cast<const float*>(inputs[0].data);
  cudaStream_t st = stream_of(ctx);
  rmsnorm_rows<<<blocks_for(T, 128), 128, 0, st>>>(x, f32(g), h, T, D);
  if (launched("rmsnorm_rows") != 0) return -1;
  gate_up<<<blocks_for(T * F, 256), 256, 0, st>>>(h, f32(wg), f32(wu), a, T, D, F);
  if (launched("gate_up") != 0) return -1;
  down_residual<<<blocks_for(T * D, 256), 256, 0, st>>>(a, f32(wd), x, static_cast<float*>(outputs[0].data), T, F, D);
  return launched("down_residual");
}

extern "C" const char* mblast_last_error(void) { return g_err; }
