// 17_depthwise_separable_relu6 — naive CUDA candidate: relu6(pointwise(relu6(depthwise(x)))),
//   depthwise 3x3 (weight [C, 1, R, S], stride 1, zero padding R/2, bias) then 1x1 [K, C, 1, 1]
//   with bias; two kernels, one thread per output element each, the depthwise result in scratch.
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

__global__ void depthwise_relu6(const float* __restrict__ x, const float* __restrict__ weight,
                                const float* __restrict__ bias, float* __restrict__ y, long long N, long long C, int H,
                                int W, int R, int S) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (idx >= N * C * H * W) return;
  const int q = static_cast<int>(idx % W);
  const int p = static_cast<int>((idx / W) % H);
  const long long nc = idx / (static_cast<long long>(W) * H);
  const long long c = nc % C;
  const float* plane = x + nc * H * W;
  const float* wc = weight + c * R * S;
  float acc = bias[c];
  for (int r = 0; r < R; ++r) {
    const int h = p - R / 2 + r;
    if (h < 0 || h >= H) continue;
    for (int s = 0; s < S; ++s) {
      const int w = q - S / 2 + s;
      if (w < 0 || w >= W) continue;
      acc += plane[static_cast<long long>(h) * W + w] * wc[r * S + s];
    }
  }
  y[idx] = fminf(fmaxf(acc, 0.0f), 6.0f);
}

__global__ void pointwise_relu6(const float* __restrict__ x, const float* __restrict__ weight,
                                const float* __restrict__ bias, float* __restrict__ y, long long N, long long C,
                                long long K, long long HW) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (idx >= N * K * HW) return;
  const long long s = idx % HW, k = (idx / HW) % K, n = idx / (HW * K);
  const float* xs = x + n * C * HW + s;
  const float* wk = weight + k * C;
  float acc = bias[k];
  for (long long c = 0; c < C; ++c) acc += wk[c] * xs[c * HW];
  y[idx] = fminf(fmaxf(acc, 0.0f), 6.0f);
}

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
                          const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  if (!check_call(ctx, n_inputs, 1, n_params, 4, n_outputs, 1)) return -1;
  if (!check_f32(inputs[0], "in0", 4) || !check_f32(params[0], "depthwise.weight", 4) ||
      !check_f32(params[1], "depthwise.bias", 1) || !check_f32(params[2], "pointwise.weight", 4) ||
      !check_f32(params[3], "pointwise.bias", 1) || !check_f32(outputs[0], "out0", 4))
    return -1;
  const long long N = inputs[0].shape[0], C = inputs[0].shape[1], H = inputs[0].shape[2], W = inputs[0].shape[3];
  const long long R = params[0].shape[2], S = params[0].shape[3], K = params[2].shape[0];
  if (params[0].shape[0] != C || params[0].shape[1] != 1 || R % 2 == 0 || S % 2 == 0 || params[1].shape[0] != C)
    FAIL("depthwise must be [%lld, 1, R, S] with odd R, S and %lld biases", C, C);
  if (params[2].shape[1] != C || params[2].shape[2] != 1 || params[2].shape[3] != 1 || params[3].shape[0] != K)
    FAIL("pointwise must be [K, %lld, 1, 1] with K biases", C);
  if (outputs[0].shape[0] != N || outputs[0].shape[1] != K || outputs[0].shape[2] != H || outputs[0].shape[3] != W)
    FAIL("out0 must be [%lld, %lld, %lld, %lld]", N, K, H, W);
  if (H > 0x7fffffff || W > 0x7fffffff || R > 0x7fffffff || S > 0x7fffffff) FAIL("a dimension is too large");
  float* dw = scratch(state, static_cast<size_t>(N * C * H * W) * sizeof(float));
  if (!dw) return -1;
  depthwise_relu6<<<blocks_for(N * C * H * W, 256), 256, 0, stream_of(ctx)>>>(
      static_cast<const float*>(inputs[0].data), static_cast<const float*>(params[0].data),
      static_cast<const float*>(params[1].data), dw, N, C, static_cast<int>(H), static_cast<int>(W),
      static_cast<int>(R), static_cast<int>(S));
  if (launched("depthwise_relu6") != 0) return -1;
  pointwise_relu6<<<blocks_for(N * K * H * W, 256), 256, 0, stream_of(ctx)>>>(
      dw, static_cast<const float*>(params[2].data), static_cast<const float*>(params[3].data),
      static_cast<float*>(outputs[0].data), N, C, K, H * W);
  return launched("pointwise_relu6");
}

extern "C" const char* mblast_last_error(void) { return g_err; }
