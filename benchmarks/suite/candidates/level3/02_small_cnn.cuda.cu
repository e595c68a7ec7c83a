// 02_small_cnn — naive CUDA candidate: the file's classifier, three stages of
//   conv 3x3 (stride 1, padding 1, no bias) -> inference BatchNorm (running statistics, eps 1e-5)
//   -> ReLU, a 2x2 max pool after the first two, the mean over H x W, then the linear head.
//   One thread per output element in every kernel (convolution with the BatchNorm and ReLU as its
//   epilogue, pooling, mean, head), the activations in scratch.
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

#define EPS 1e-5f

// y = relu((conv(x, w) - mean) / sqrt(var + eps) * gamma + beta), stride 1, zero padding R/2.
__global__ void conv_bn_relu(const float* __restrict__ x, const float* __restrict__ w,
                             const float* __restrict__ gamma, const float* __restrict__ beta,
                             const float* __restrict__ mean, const float* __restrict__ var, float* __restrict__ y,
                             int N, int C, int H, int W, int K, int R, int S) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (idx >= static_cast<long long>(N) * K * H * W) return;
  const int q = static_cast<int>(idx % W);
  const int p = static_cast<int>((idx / W) % H);
  const int k = static_cast<int>((idx / (static_cast<long long>(W) * H)) % K);
  const int n = static_cast<int>(idx / (static_cast<long long>(W) * H * K));
  float acc = 0.0f;
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r) {
      const int h = p - R / 2 + r;
      if (h < 0 || h >= H) continue;
      for (int s = 0; s < S; ++s) {
        const int ww = q - S / 2 + s;
        if (ww < 0 || ww >= W) continue;
        acc += x[((static_cast<long long>(n) * C + c) * H + h) * W + ww] *
               w[((static_cast<long long>(k) * C + c) * R + r) * S + s];
      }
    }
  const float z = (acc - mean[k]) / sqrtf(var[k] + EPS) * gamma[k] + beta[k];
  y[idx] = fmaxf(z, 0.0f);
}

// 2x2 max pool, stride 2, floor: x [NC, H, W] -> y [NC, H/2, W/2].
__global__ void maxpool2(const float* __restrict__ x, float* __restrict__ y, long long NC, long long H, long long W) {
  const long long P = H / 2, Q = W / 2;
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (idx >= NC * P * Q) return;
  const long long q = idx % Q, p = (idx / Q) % P, nc = idx / (P * Q);
  const float* a = x + (nc * H + 2 * p) * W + 2 * q;
  y[idx] = fmaxf(fmaxf(a[0], a[1]), fmaxf(a[W], a[W + 1]));
}

// y[nc] = mean of the plane x[nc, :, :] of hw elements.
__global__ void mean_planes(const float* __restrict__ x, float* __restrict__ y, long long NC, long long hw) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= NC) return;
  float acc = 0.0f;
  for (long long j = 0; j < hw; ++j) acc += x[i * hw + j];
  y[i] = acc / static_cast<float>(hw);
}

__global__ void linear(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                       float* __restrict__ y, long long T, long long Din, long long Dout) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (idx >= T * Dout) return;
  const long long t = idx / Dout, o = idx % Dout;
  float acc = b[o];
  for (long long k = 0; k < Din; ++k) acc += x[t * Din + k] * w[o * Din + k];
  y[idx] = acc;
}

struct Stage {
  const mblast_tensor *conv, *gamma, *beta, *mean, *var;
};

// Finds and checks stage i's tensors (conv<i>.weight, bn<i>.*) for `c_in` input channels.
static bool find_stage(const mblast_tensor* params, int32_t n_params, int i, long long c_in, Stage* st) {
  char name[64];
  std::snprintf(name, sizeof name, "conv%d.weight", i);
  if (!(st->conv = find_param(params, n_params, name, 4))) return false;
  const mblast_tensor** bn[4] = {&st->gamma, &st->beta, &st->mean, &st->var};
  const char* what[4] = {"weight", "bias", "running_mean", "running_var"};
  for (int j = 0; j < 4; ++j) {
    std::snprintf(name, sizeof name, "bn%d.%s", i, what[j]);
    if (!(*bn[j] = find_param(params, n_params, name, 1))) return false;
    if ((*bn[j])->shape[0] != st->conv->shape[0]) {
      std::snprintf(g_err, sizeof g_err, "%s must have %lld entries", name, (long long)st->conv->shape[0]);
      return false;
    }
  }
  if (st->conv->shape[1] != c_in || st->conv->shape[2] % 2 == 0 || st->conv->shape[3] % 2 == 0) {
    std::snprintf(g_err, sizeof g_err, "conv%d.weight must be [K, %lld, R, S] with odd R, S", i, c_in);
    return false;
  }
  return true;
}

static int run_stage(cudaStream_t st, const Stage& s, const float* x, float* y, long long N, long long C, long long H,
                     long long W) {
  const long long K = s.conv->shape[0];
  conv_bn_relu<<<blocks_for(N * K * H * W, 256), 256, 0, st>>>(
      x, f32(s.conv), f32(s.gamma), f32(s.beta), f32(s.mean), f32(s.var), y, static_cast<int>(N),
      static_cast<int>(C), static_cast<int>(H), static_cast<int>(W), static_cast<int>(K),
      static_cast<int>(s.conv->shape[2]), static_cast<int>(s.conv->shape[3]));
  return launched("conv_bn_relu");
}

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
                          const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  if (!check_call(ctx, n_inputs, 1, n_params, 20, n_outputs, 1)) return -1;
  if (!check_f32(inputs[0], "in0", 4) || !check_f32(outputs[0], "out0", 2)) return -1;
  const long long N = inputs[0].shape[0], C0 = inputs[0].shape[1], H = inputs[0].shape[2], W = inputs[0].shape[3];
  Stage s1, s2, s3;
  if (!find_stage(params, n_params, 1, C0, &s1)) return -1;
  const long long C1 = s1.conv->shape[0];
  if (!find_stage(params, n_params, 2, C1, &s2)) return -1;
  const long long C2 = s2.conv->shape[0];
  if (!find_stage(params, n_params, 3, C2, &s3)) return -1;
  const long long C3 = s3.conv->shape[0];
  const mblast_tensor* hw = find_param(params, n_params, "head.weight", 2);
  const mblast_tensor* hb = find_param(params, n_params, "head.bias", 1);
  if (!hw || !hb) return -1;
  const long long classes = hw->shape[0];
  if (hw->shape[1] != C3 || hb->shape[0] != classes) FAIL("head must be [classes, %lld] with classes biases", C3);
  if (outputs[0].shape[0] != N || outputs[0].shape[1] != classes) FAIL("out0 must be [%lld, %lld]", N, classes);
  if (H > 0x7fffffff || W > 0x7fffffff || N * C3 > 0x7fffffff) FAIL("a dimension is too large for this kernel");
  const long long H1 = H / 2, W1 = W / 2, H2 = H1 / 2, W2 = W1 / 2;
  if (H2 <= 0 || W2 <= 0) FAIL("in0 is too small for two 2x2 poolings");

  const size_t n_a1 = static_cast<size_t>(N * C1 * H * W), n_p1 = static_cast<size_t>(N * C1 * H1 * W1);
  const size_t n_a2 = static_cast<size_t>(N * C2 * H1 * W1), n_p2 = static_cast<size_t>(N * C2 * H2 * W2);
  const size_t n_a3 = static_cast<size_t>(N * C3 * H2 * W2), n_g = static_cast<size_t>(N * C3);
  float* a1 = scratch(state, (n_a1 + n_p1 + n_a2 + n_p2 + n_a3 + n_g) * sizeof(float));
  if (!a1) return -1;
  float* p1 = a1 + n_a1;
  float* a2 = p1 + n_p1;
  float* p2 = a2 + n_a2;
  float* a3 = p2 + n_p2;
  float* g = a3 + n_a3;
  cudaStream_t st = stream_of(ctx);

  if (run_stage(st, s1, static_cast<const float*>(inputs[0].data), a1, N, C0, H, W) != 0) return -1;
  maxpool2<<<blocks_for(static_cast<long long>(n_p1), 256), 256, 0, st>>>(a1, p1, N * C1, H, W);
  if (launched("maxpool2 (1)") != 0) return -1;
  if (run_stage(st, s2, p1, a2, N, C1, H1, W1) != 0) return -1;
  maxpool2<<<blocks_for(static_cast<long long>(n_p2), 256), 256, 0, st>>>(a2, p2, N * C2, H1, W1);
  if (launched("maxpool2 (2)") != 0) return -1;
  if (run_stage(st, s3, p2, a3, N, C2, H2, W2) != 0) return -1;
  mean_planes<<<blocks_for(N * C3, 128), 128, 0, st>>>(a3, g, N * C3, H2 * W2);
  if (launched("mean_planes") != 0) return -1;
  linear<<<blocks_for(N * classes, 128), 128, 0, st>>>(g, f32(hw), f32(hb), static_cast<float*>(outputs[0].data), N,
                                                        C3, classes);
  return launched("linear (head)");
}

extern "C" const char* mblast_last_error(void) { return g_err; }
