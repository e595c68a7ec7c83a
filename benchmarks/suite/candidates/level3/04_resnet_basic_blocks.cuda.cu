// 04_resnet_basic_blocks — naive CUDA candidate: the file's three basic blocks,
//   block(x) = relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), conv 3x3 padding 1 without
//   bias, inference BatchNorm (running statistics, eps 1e-5), shortcut = x, or bn(1x1 conv,
//   stride 2) in block2. Strides 1, 2, 1 are the file's structure (block2 doubles the channels).
//   One kernel per convolution, one thread per output element with BatchNorm, residual and ReLU
//   as its epilogue; the activations in scratch.
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

// y = act((conv(x, w) - mean) / sqrt(var + eps) * gamma + beta + res), act = ReLU when relu != 0;
// res may be null. Stride `stride`, zero padding `pad`.
__global__ void conv_bn(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ gamma,
                        const float* __restrict__ beta, const float* __restrict__ mean, const float* __restrict__ var,
                        const float* __restrict__ res, float* __restrict__ y, int N, int C, int H, int W, int K,
                        int R, int S, int P, int Q, int stride, int pad, int relu) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (idx >= static_cast<long long>(N) * K * P * Q) return;
  const int q = static_cast<int>(idx % Q);
  const int p = static_cast<int>((idx / Q) % P);
  const int k = static_cast<int>((idx / (static_cast<long long>(Q) * P)) % K);
  const int n = static_cast<int>(idx / (static_cast<long long>(Q) * P * K));
  float acc = 0.0f;
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r) {
      const int h = p * stride - pad + r;
      if (h < 0 || h >= H) continue;
      for (int s = 0; s < S; ++s) {
        const int ww = q * stride - pad + s;
        if (ww < 0 || ww >= W) continue;
        acc += x[((static_cast<long long>(n) * C + c) * H + h) * W + ww] *
               w[((static_cast<long long>(k) * C + c) * R + r) * S + s];
      }
    }
  float z = (acc - mean[k]) / sqrtf(var[k] + EPS) * gamma[k] + beta[k];
  if (res) z += res[idx];
  y[idx] = relu ? fmaxf(z, 0.0f) : z;
}

// A convolution with its BatchNorm: "<prefix>conv<i>.weight" with "<prefix>bn<i>.*", or the
// projection "<prefix>proj.weight" with "<prefix>proj_bn.*".
struct ConvBn {
  const mblast_tensor *w, *gamma, *beta, *mean, *var;
};

static bool find_conv_bn(const mblast_tensor* params, int32_t n_params, const char* conv, const char* bn, ConvBn* cb) {
  if (!(cb->w = find_param(params, n_params, conv, 4))) return false;
  const mblast_tensor** t[4] = {&cb->gamma, &cb->beta, &cb->mean, &cb->var};
  const char* what[4] = {"weight", "bias", "running_mean", "running_var"};
  for (int j = 0; j < 4; ++j) {
    char name[96];
    std::snprintf(name, sizeof name, "%s.%s", bn, what[j]);
    if (!(*t[j] = find_param(params, n_params, name, 1))) return false;
    if ((*t[j])->shape[0] != cb->w->shape[0]) {
      std::snprintf(g_err, sizeof g_err, "%s must have %lld entries", name, (long long)cb->w->shape[0]);
      return false;
    }
  }
  return true;
}

// Runs one conv + BatchNorm on x [N, C, H, W] into y [N, K, P, Q]; P, Q are returned.
static int conv_bn_launch(cudaStream_t st, const ConvBn& cb, const float* x, const float* res, float* y, long long N,
                          long long C, long long H, long long W, int stride, int relu, long long* P, long long* Q) {
  const long long K = cb.w->shape[0], R = cb.w->shape[2], S = cb.w->shape[3];
  if (cb.w->shape[1] != C)
    FAIL("a convolution weight has %lld input channels, its input %lld", (long long)cb.w->shape[1], C);
  if (R != S || R % 2 == 0) FAIL("expected square odd convolution kernels, got %lld x %lld", R, S);
  const int pad = static_cast<int>(R / 2);
  *P = (H + 2 * pad - R) / stride + 1;
  *Q = (W + 2 * pad - S) / stride + 1;
  conv_bn<<<blocks_for(N * K * *P * *Q, 256), 256, 0, st>>>(
      x, f32(cb.w), f32(cb.gamma), f32(cb.beta), f32(cb.mean), f32(cb.var), res, y, static_cast<int>(N),
      static_cast<int>(C), static_cast<int>(H), static_cast<int>(W), static_cast<int>(K), static_cast<int>(R),
      static_cast<int>(S), static_cast<int>(*P), static_cast<int>(*Q), stride, pad, relu);
  return launched("conv_bn");
}

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
                          const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  if (!check_call(ctx, n_inputs, 1, n_params, 42, n_outputs, 1)) return -1;
  if (!check_f32(inputs[0], "in0", 4) || !check_f32(outputs[0], "out0", 4)) return -1;
  const long long N = inputs[0].shape[0], C = inputs[0].shape[1], H = inputs[0].shape[2], W = inputs[0].shape[3];
  if (N * 2 * C * H * W > 0x7fffffff) FAIL("in0 is too large for this kernel");
  ConvBn c1[3], c2[3], proj;
  for (int b = 0; b < 3; ++b) {
    char conv[64], bn[64];
    std::snprintf(conv, sizeof conv, "block%d.conv1.weight", b + 1);
    std::snprintf(bn, sizeof bn, "block%d.bn1", b + 1);
    if (!find_conv_bn(params, n_params, conv, bn, &c1[b])) return -1;
    std::snprintf(conv, sizeof conv, "block%d.conv2.weight", b + 1);
    std::snprintf(bn, sizeof bn, "block%d.bn2", b + 1);
    if (!find_conv_bn(params, n_params, conv, bn, &c2[b])) return -1;
  }
  if (!find_conv_bn(params, n_params, "block2.proj.weight", "block2.proj_bn", &proj)) return -1;
  if (proj.w->shape[2] != 1 || proj.w->shape[3] != 1) FAIL("block2.proj.weight must be a 1x1 convolution");
  const long long C2 = c1[1].w->shape[0];
  const long long H2 = (H - 1) / 2 + 1, W2 = (W - 1) / 2 + 1;  // 3x3 pad 1 and 1x1 pad 0, both stride 2
  if (c1[0].w->shape[0] != C || c2[0].w->shape[0] != C || c2[1].w->shape[0] != C2 || proj.w->shape[0] != C2 ||
      c1[2].w->shape[0] != C2 || c2[2].w->shape[0] != C2)
    FAIL("expected blocks of %lld, %lld and %lld channels", C, C2, C2);
  if (outputs[0].shape[0] != N || outputs[0].shape[1] != C2 || outputs[0].shape[2] != H2 || outputs[0].shape[3] != W2)
    FAIL("out0 must be [%lld, %lld, %lld, %lld]", N, C2, H2, W2);

  const long long most = N * (C * H * W > C2 * H2 * W2 ? C * H * W : C2 * H2 * W2);
  float* t = scratch(state, 4 * static_cast<size_t>(most) * sizeof(float));
  if (!t) return -1;
  float* out1 = t + most;
  float* sc = out1 + most;
  float* out2 = sc + most;
  const float* x = static_cast<const float*>(inputs[0].data);
  float* y = static_cast<float*>(outputs[0].data);
  cudaStream_t st = stream_of(ctx);
  long long P, Q, P2, Q2;
  // block1: C -> C, stride 1, identity shortcut
  if (conv_bn_launch(st, c1[0], x, nullptr, t, N, C, H, W, 1, 1, &P, &Q) != 0) return -1;
  if (conv_bn_launch(st, c2[0], t, x, out1, N, C, P, Q, 1, 1, &P, &Q) != 0) return -1;
  // block2: C -> 2C, stride 2, projection shortcut
  if (conv_bn_launch(st, proj, out1, nullptr, sc, N, C, H, W, 2, 0, &P2, &Q2) != 0) return -1;
  if (conv_bn_launch(st, c1[1], out1, nullptr, t, N, C, H, W, 2, 1, &P, &Q) != 0) return -1;
  if (P != P2 || Q != Q2 || P != H2 || Q != W2) FAIL("block2's shortcut and main path differ in shape");
  if (conv_bn_launch(st, c2[1], t, sc, out2, N, C2, P, Q, 1, 1, &P, &Q) != 0) return -1;
  // block3: 2C -> 2C, stride 1, identity shortcut
  if (conv_bn_launch(st, c1[2], out2, nullptr, t, N, C2, H2, W2, 1, 1, &P, &Q) != 0) return -1;
  return conv_bn_launch(st, c2[2], t, out2, y, N, C2, P, Q, 1, 1, &P, &Q);
}

extern "C" const char* mblast_last_error(void) { return g_err; }
