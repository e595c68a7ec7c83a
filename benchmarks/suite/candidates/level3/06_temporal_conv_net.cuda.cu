// 06_temporal_conv_net — naive CUDA candidate: the file's causal convolution network on x [N, C, L]:
//   per block, h = depthwise conv1d (kernel R, left padding R - 1, bias), GroupNorm with one group
//   (eps 1e-5, affine), pointwise C -> E with bias, exact GELU, pointwise E -> C with bias, plus the
//   block's input; then the mean over time and the linear head. The block count is read from the
//   parameters (blocks.<i>.*). One thread per output element in every kernel except GroupNorm (one
//   thread per sample, statistics accumulated in double: a sample spans C x L values, a million at
//   the full size); the activations in scratch.
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

// y[n, c, t] = b[c] + sum_r w[c, r] x[n, c, t - (R - 1) + r], zero before the sequence start.
__global__ void depthwise_causal(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                                 float* __restrict__ y, long long NC, long long C, long long L, long long R) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (idx >= NC * L) return;
  const long long t = idx % L, nc = idx / L, c = nc % C;
  const float* xr = x + nc * L;
  float acc = b[c];
  for (long long r = 0; r < R; ++r) {
    const long long s = t - (R - 1) + r;
    if (s >= 0) acc += w[c * R + r] * xr[s];
  }
  y[idx] = acc;
}

// GroupNorm with one group: per sample n, statistics over all C x L values.
__global__ void groupnorm1(const float* __restrict__ x, const float* __restrict__ gamma,
                           const float* __restrict__ beta, float* __restrict__ y, long long N, long long C,
                           long long L) {
  const long long n = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (n >= N) return;
  const long long count = C * L;
  const float* xs = x + n * count;
  float* ys = y + n * count;
  double sum = 0.0;
  for (long long i = 0; i < count; ++i) sum += xs[i];
  const double mean = sum / static_cast<double>(count);
  double sq = 0.0;
  for (long long i = 0; i < count; ++i) sq += (xs[i] - mean) * (xs[i] - mean);
  const float m = static_cast<float>(mean);
  const float rstd = static_cast<float>(1.0 / sqrt(sq / static_cast<double>(count) + EPS));
  for (long long i = 0; i < count; ++i) {
    const long long c = i / L;
    ys[i] = (xs[i] - m) * rstd * gamma[c] + beta[c];
  }
}

// y[n, o, t] = res[n, o, t] + act(b[o] + sum_c w[o, c] x[n, c, t]); res may be null, act is exact
// GELU when gelu != 0.
__global__ void pointwise(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                          const float* __restrict__ res, float* __restrict__ y, long long N, long long Cin,
                          long long Cout, long long L, int gelu) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (idx >= N * Cout * L) return;
  const long long t = idx % L, o = (idx / L) % Cout, n = idx / (L * Cout);
  const float* xs = x + n * Cin * L + t;
  float acc = b[o];
  for (long long c = 0; c < Cin; ++c) acc += w[o * Cin + c] * xs[c * L];
  if (gelu) acc = 0.5f * acc * (1.0f + erff(acc * 0.70710678118654752f));
  y[idx] = res ? res[idx] + acc : acc;
}

__global__ void mean_rows(const float* __restrict__ x, float* __restrict__ y, long long rows, long long cols) {
  const long long r = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  float acc = 0.0f;
  for (long long j = 0; j < cols; ++j) acc += x[r * cols + j];
  y[r] = acc / static_cast<float>(cols);
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

struct Block {
  const mblast_tensor *dw_w, *dw_b, *gn_w, *gn_b, *pw1_w, *pw1_b, *pw2_w, *pw2_b;
};

static bool find_block(const mblast_tensor* params, int32_t n_params, int i, long long C, Block* b) {
  const char* names[8] = {"dw.weight",  "dw.bias",  "norm.weight", "norm.bias",
                          "pw1.weight", "pw1.bias", "pw2.weight",  "pw2.bias"};
  const int dims[8] = {3, 1, 1, 1, 3, 1, 3, 1};
  const mblast_tensor** slots[8] = {&b->dw_w, &b->dw_b, &b->gn_w, &b->gn_b, &b->pw1_w, &b->pw1_b, &b->pw2_w, &b->pw2_b};
  for (int j = 0; j < 8; ++j) {
    char name[64];
    std::snprintf(name, sizeof name, "blocks.%d.%s", i, names[j]);
    if (!(*slots[j] = find_param(params, n_params, name, dims[j]))) return false;
  }
  const long long E = b->pw1_w->shape[0];
  const bool ok = b->dw_w->shape[0] == C && b->dw_w->shape[1] == 1 && b->dw_b->shape[0] == C &&
                  b->gn_w->shape[0] == C && b->gn_b->shape[0] == C && b->pw1_w->shape[1] == C &&
                  b->pw1_w->shape[2] == 1 && b->pw1_b->shape[0] == E && b->pw2_w->shape[0] == C &&
                  b->pw2_w->shape[1] == E && b->pw2_w->shape[2] == 1 && b->pw2_b->shape[0] == C;
  if (!ok) std::snprintf(g_err, sizeof g_err, "blocks.%d: parameter shapes do not fit %lld channels", i, C);
  return ok;
}

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
                          const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  if (!ctx || ctx->backend != MBLAST_BACKEND_CUDA) FAIL("mblast_context is not a CUDA context");
  if (n_inputs != 1 || n_outputs != 1 || n_params < 10 || (n_params - 2) % 8 != 0 || n_params > 8 * 32 + 2)
    FAIL("expected 1 input, 8 parameters per block plus the head's 2, 1 output; got %d, %d, %d",
         static_cast<int>(n_inputs), static_cast<int>(n_params), static_cast<int>(n_outputs));
  if (!check_f32(inputs[0], "in0", 3) || !check_f32(outputs[0], "out0", 2)) return -1;
  const long long N = inputs[0].shape[0], C = inputs[0].shape[1], L = inputs[0].shape[2];
  const int n_blocks = (n_params - 2) / 8;
  Block blocks[32];
  long long E = 1;
  for (int i = 0; i < n_blocks; ++i) {
    if (!find_block(params, n_params, i, C, &blocks[i])) return -1;
    if (blocks[i].pw1_w->shape[0] > E) E = blocks[i].pw1_w->shape[0];
  }
  const mblast_tensor* hw = find_param(params, n_params, "head.weight", 2);
  const mblast_tensor* hb = find_param(params, n_params, "head.bias", 1);
  if (!hw || !hb) return -1;
  const long long classes = hw->shape[0];
  if (hw->shape[1] != C || hb->shape[0] != classes) FAIL("head must be [classes, %lld] with classes biases", C);
  if (outputs[0].shape[0] != N || outputs[0].shape[1] != classes) FAIL("out0 must be [%lld, %lld]", N, classes);

  // Scratch: two block outputs (ping-pong), the depthwise and normalised activations [N, C, L],
  // the expanded one [N, E, L], the time means [N, C].
  const long long ncl = N * C * L;
  float* buf = scratch(state, static_cast<size_t>(4 * ncl + N * E * L + N * C) * sizeof(float));
  if (!buf) return -1;
  float* ping[2] = {buf, buf + ncl};
  float* h = buf + 2 * ncl;
  float* hn = h + ncl;
  float* e = hn + ncl;
  float* means = e + N * E * L;
  cudaStream_t st = stream_of(ctx);
  const float* x = static_cast<const float*>(inputs[0].data);
  for (int i = 0; i < n_blocks; ++i) {
    const Block& b = blocks[i];
    const long long R = b.dw_w->shape[2], Eb = b.pw1_w->shape[0];
    float* y = ping[i % 2];
    depthwise_causal<<<blocks_for(ncl, 256), 256, 0, st>>>(x, f32(b.dw_w), f32(b.dw_b), h, N * C, C, L, R);
    if (launched("depthwise_causal") != 0) return -1;
    groupnorm1<<<blocks_for(N, 32), 32, 0, st>>>(h, f32(b.gn_w), f32(b.gn_b), hn, N, C, L);
    if (launched("groupnorm1") != 0) return -1;
    pointwise<<<blocks_for(N * Eb * L, 256), 256, 0, st>>>(hn, f32(b.pw1_w), f32(b.pw1_b), nullptr, e, N, C, Eb, L, 1);
    if (launched("pointwise (pw1)") != 0) return -1;
    pointwise<<<blocks_for(ncl, 256), 256, 0, st>>>(e, f32(b.pw2_w), f32(b.pw2_b), x, y, N, Eb, C, L, 0);
    if (launched("pointwise (pw2)") != 0) return -1;
    x = y;
  }
  mean_rows<<<blocks_for(N * C, 128), 128, 0, st>>>(x, means, N * C, L);
  if (launched("mean_rows") != 0) return -1;
  linear<<<blocks_for(N * classes, 128), 128, 0, st>>>(means, f32(hw), f32(hb), static_cast<float*>(outputs[0].data),
                                                        N, C, classes);
  return launched("linear (head)");
}

extern "C" const char* mblast_last_error(void) { return g_err; }
