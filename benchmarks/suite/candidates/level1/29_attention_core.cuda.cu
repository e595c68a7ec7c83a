// 29_attention_core — naive CUDA candidate: out = softmax(Q K^T / sqrt(D)) V for Q, K, V
//   [B, H, S, D], unfused like the eager model: one thread per score (a dot product over D) into
//   an S x S scratch per (b, h), one thread per score row for the softmax (in place), one thread
//   per output element for P V.
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

__global__ void scores_qk(const float* __restrict__ q, const float* __restrict__ k, float* __restrict__ s,
                          long long BH, long long S, long long D, float scale) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (idx >= BH * S * S) return;
  const long long j = idx % S, i = (idx / S) % S, bh = idx / (S * S);
  const float* qi = q + (bh * S + i) * D;
  const float* kj = k + (bh * S + j) * D;
  float acc = 0.0f;
  for (long long d = 0; d < D; ++d) acc += qi[d] * kj[d];
  s[idx] = acc * scale;
}

__global__ void softmax_rows_inplace(float* __restrict__ s, long long rows, long long cols) {
  const long long r = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  float* sr = s + r * cols;
  float m = -INFINITY;
  for (long long j = 0; j < cols; ++j) m = fmaxf(m, sr[j]);
  float sum = 0.0f;
  for (long long j = 0; j < cols; ++j) sum += expf(sr[j] - m);
  const float inv = 1.0f / sum;
  for (long long j = 0; j < cols; ++j) sr[j] = expf(sr[j] - m) * inv;
}

__global__ void probs_v(const float* __restrict__ p, const float* __restrict__ v, float* __restrict__ out, long long BH,
                        long long S, long long D) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (idx >= BH * S * D) return;
  const long long d = idx % D, i = (idx / D) % S, bh = idx / (D * S);
  const float* pi = p + (bh * S + i) * S;
  const float* vb = v + bh * S * D + d;
  float acc = 0.0f;
  for (long long j = 0; j < S; ++j) acc += pi[j] * vb[j * D];
  out[idx] = acc;
}

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
                          const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)params;
  if (!check_call(ctx, n_inputs, 3, n_params, 0, n_outputs, 1)) return -1;
  if (!check_f32(inputs[0], "in0", 4) || !check_f32(inputs[1], "in1", 4) || !check_f32(inputs[2], "in2", 4) ||
      !check_f32(outputs[0], "out0", 4))
    return -1;
  if (!same_shape(inputs[0], inputs[1]) || !same_shape(inputs[0], inputs[2]) || !same_shape(inputs[0], outputs[0]))
    FAIL("in0, in1, in2 and out0 must all be [B, H, S, D]");
  const long long BH = inputs[0].shape[0] * inputs[0].shape[1], S = inputs[0].shape[2], D = inputs[0].shape[3];
  const float scale = static_cast<float>(1.0 / sqrt(static_cast<double>(D)));  // the module's 1 / sqrt(head_dim)
  float* s = scratch(state, static_cast<size_t>(BH * S * S) * sizeof(float));
  if (!s) return -1;
  cudaStream_t st = stream_of(ctx);
  const float* q = static_cast<const float*>(inputs[0].data);
  const float* k = static_cast<const float*>(inputs[1].data);
  scores_qk<<<blocks_for(BH * S * S, 256), 256, 0, st>>>(q, k, s, BH, S, D, scale);
  if (launched("scores_qk") != 0) return -1;
  softmax_rows_inplace<<<blocks_for(BH * S, 128), 128, 0, st>>>(s, BH * S, S);
  if (launched("softmax_rows_inplace") != 0) return -1;
  probs_v<<<blocks_for(BH * S * D, 256), 256, 0, st>>>(s, static_cast<const float*>(inputs[2].data),
                                                        static_cast<float*>(outputs[0].data), BH, S, D);
  return launched("probs_v");
}

extern "C" const char* mblast_last_error(void) { return g_err; }
