// 01_transformer_block — naive CUDA candidate: the pre-norm encoder block of the file,
//   h = x + out_proj(attention(LayerNorm1(x))), y = h + fc2(gelu(fc1(LayerNorm2(h)))),
//   with x [B, S, D], a fused qkv projection [3D, D] split as (3, heads, head_dim), exact GELU,
//   LayerNorm eps 1e-5. Unfused, like the eager model: one thread per row for each LayerNorm and
//   softmax, one thread per output element for each linear layer and attention product, the
//   intermediates in scratch.
//   The head count is the file's constructor argument HEADS, which no tensor carries: it is
//   looked up from D (4 heads for D = 128 at the small size, 16 for D = 1024 at the full size);
//   other widths are refused.
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

static long long heads_for(long long d_model) { return d_model == 128 ? 4 : d_model == 1024 ? 16 : 0; }

__global__ void layernorm_rows(const float* __restrict__ x, const float* __restrict__ gamma,
                               const float* __restrict__ beta, float* __restrict__ y, long long rows, long long cols) {
  const long long r = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  const float* xr = x + r * cols;
  float* yr = y + r * cols;
  float sum = 0.0f;
  for (long long j = 0; j < cols; ++j) sum += xr[j];
  const float mean = sum / static_cast<float>(cols);
  float sq = 0.0f;
  for (long long j = 0; j < cols; ++j) sq += (xr[j] - mean) * (xr[j] - mean);
  const float rstd = 1.0f / sqrtf(sq / static_cast<float>(cols) + EPS);
  for (long long j = 0; j < cols; ++j) yr[j] = (xr[j] - mean) * rstd * gamma[j] + beta[j];
}

// y[t, o] = res[t, o] + act(b[o] + sum_k x[t, k] w[o, k]); res may be null, act is exact GELU when
// gelu != 0.
__global__ void linear(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                       const float* __restrict__ res, float* __restrict__ y, long long T, long long Din,
                       long long Dout, int gelu) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (idx >= T * Dout) return;
  const long long t = idx / Dout, o = idx % Dout;
  const float* xt = x + t * Din;
  const float* wo = w + o * Din;
  float acc = b[o];
  for (long long k = 0; k < Din; ++k) acc += xt[k] * wo[k];
  if (gelu) acc = 0.5f * acc * (1.0f + erff(acc * 0.70710678118654752f));
  y[idx] = res ? res[idx] + acc : acc;
}

// scores[b, h, i, j] = scale * q[b, i, h, :] . k[b, j, h, :], q and k read from qkv [B, S, 3, H, Dh].
__global__ void attention_scores(const float* __restrict__ qkv, float* __restrict__ scores, long long B,
                                 long long H, long long S, long long Dh, float scale) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (idx >= B * H * S * S) return;
  const long long j = idx % S, i = (idx / S) % S, h = (idx / (S * S)) % H, b = idx / (S * S * H);
  const long long D = H * Dh;
  const float* q = qkv + (b * S + i) * 3 * D + h * Dh;
  const float* k = qkv + (b * S + j) * 3 * D + D + h * Dh;
  float acc = 0.0f;
  for (long long d = 0; d < Dh; ++d) acc += q[d] * k[d];
  scores[idx] = acc * scale;
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

// ctx[b, i, h * Dh + d] = sum_j probs[b, h, i, j] v[b, j, h, d], v read from qkv.
__global__ void attention_context(const float* __restrict__ probs, const float* __restrict__ qkv,
                                  float* __restrict__ ctx, long long B, long long H, long long S, long long Dh) {
  const long long D = H * Dh;
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (idx >= B * S * D) return;
  const long long c = idx % D, i = (idx / D) % S, b = idx / (D * S);
  const long long h = c / Dh, d = c % Dh;
  const float* p = probs + ((b * H + h) * S + i) * S;
  const float* v = qkv + b * S * 3 * D + 2 * D + h * Dh + d;
  float acc = 0.0f;
  for (long long j = 0; j < S; ++j) acc += p[j] * v[j * 3 * D];
  ctx[idx] = acc;
}

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
                          const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  if (!check_call(ctx, n_inputs, 1, n_params, 12, n_outputs, 1)) return -1;
  if (!check_f32(inputs[0], "in0", 3) || !check_f32(outputs[0], "out0", 3)) return -1;
  if (!same_shape(inputs[0], outputs[0])) FAIL("out0 must have the shape of in0");
  const long long B = inputs[0].shape[0], S = inputs[0].shape[1], D = inputs[0].shape[2], T = B * S;
  const long long H = heads_for(D);
  if (H == 0) FAIL("no known head count for width %lld (the suite uses 4 heads at 128, 16 at 1024)", D);
  const long long Dh = D / H;
  const mblast_tensor* n1w = find_param(params, n_params, "norm1.weight", 1);
  const mblast_tensor* n1b = find_param(params, n_params, "norm1.bias", 1);
  const mblast_tensor* qw = find_param(params, n_params, "qkv.weight", 2);
  const mblast_tensor* qb = find_param(params, n_params, "qkv.bias", 1);
  const mblast_tensor* ow = find_param(params, n_params, "out_proj.weight", 2);
  const mblast_tensor* ob = find_param(params, n_params, "out_proj.bias", 1);
  const mblast_tensor* n2w = find_param(params, n_params, "norm2.weight", 1);
  const mblast_tensor* n2b = find_param(params, n_params, "norm2.bias", 1);
  const mblast_tensor* f1w = find_param(params, n_params, "fc1.weight", 2);
  const mblast_tensor* f1b = find_param(params, n_params, "fc1.bias", 1);
  const mblast_tensor* f2w = find_param(params, n_params, "fc2.weight", 2);
  const mblast_tensor* f2b = find_param(params, n_params, "fc2.bias", 1);
  if (!n1w || !n1b || !qw || !qb || !ow || !ob || !n2w || !n2b || !f1w || !f1b || !f2w || !f2b) return -1;
  const long long F = f1w->shape[0];
  if (n1w->shape[0] != D || n1b->shape[0] != D || n2w->shape[0] != D || n2b->shape[0] != D)
    FAIL("the LayerNorm parameters must have %lld entries", D);
  if (qw->shape[0] != 3 * D || qw->shape[1] != D || qb->shape[0] != 3 * D) FAIL("qkv must be [%lld, %lld]", 3 * D, D);
  if (ow->shape[0] != D || ow->shape[1] != D || ob->shape[0] != D) FAIL("out_proj must be [%lld, %lld]", D, D);
  if (f1w->shape[1] != D || f1b->shape[0] != F) FAIL("fc1 must be [F, %lld] with F biases", D);
  if (f2w->shape[0] != D || f2w->shape[1] != F || f2b->shape[0] != D) FAIL("fc2 must be [%lld, %lld]", D, F);

  // Scratch: ln [T, D], qkv [T, 3D], scores [B, H, S, S], attention context [T, D], h [T, D], fc1 [T, F].
  const size_t n_ln = static_cast<size_t>(T * D), n_qkv = static_cast<size_t>(T * 3 * D);
  const size_t n_scores = static_cast<size_t>(B * H * S * S), n_f1 = static_cast<size_t>(T * F);
  float* base = scratch(state, (3 * n_ln + n_qkv + n_scores + n_f1) * sizeof(float));
  if (!base) return -1;
  float* ln = base;
  float* qkv = ln + n_ln;
  float* scores = qkv + n_qkv;
  float* attn = scores + n_scores;
  float* h = attn + n_ln;
  float* f1 = h + n_ln;
  const float* x = static_cast<const float*>(inputs[0].data);
  float* y = static_cast<float*>(outputs[0].data);
  const float scale = static_cast<float>(1.0 / sqrt(static_cast<double>(Dh)));
  cudaStream_t st = stream_of(ctx);

  layernorm_rows<<<blocks_for(T, 128), 128, 0, st>>>(x, f32(n1w), f32(n1b), ln, T, D);
  if (launched("layernorm_rows (norm1)") != 0) return -1;
  linear<<<blocks_for(T * 3 * D, 256), 256, 0, st>>>(ln, f32(qw), f32(qb), nullptr, qkv, T, D, 3 * D, 0);
  if (launched("linear (qkv)") != 0) return -1;
  attention_scores<<<blocks_for(B * H * S * S, 256), 256, 0, st>>>(qkv, scores, B, H, S, Dh, scale);
  if (launched("attention_scores") != 0) return -1;
  softmax_rows_inplace<<<blocks_for(B * H * S, 128), 128, 0, st>>>(scores, B * H * S, S);
  if (launched("softmax_rows_inplace") != 0) return -1;
  attention_context<<<blocks_for(T * D, 256), 256, 0, st>>>(scores, qkv, attn, B, H, S, Dh);
  if (launched("attention_context") != 0) return -1;
  linear<<<blocks_for(T * D, 256), 256, 0, st>>>(attn, f32(ow), f32(ob), x, h, T, D, D, 0);
  if (launched("linear (out_proj)") != 0) return -1;
  layernorm_rows<<<blocks_for(T, 128), 128, 0, st>>>(h, f32(n2w), f32(n2b), ln, T, D);
  if (launched("layernorm_rows (norm2)") != 0) return -1;
  linear<<<blocks_for(T * F, 256), 256, 0, st>>>(ln, f32(f1w), f32(f1b), nullptr, f1, T, D, F, 1);
  if (launched("linear (fc1)") != 0) return -1;
  linear<<<blocks_for(T * D, 256), 256, 0, st>>>(f1, f32(f2w), f32(f2b), h, y, T, F, D, 0);
  return launched("linear (fc2)");
}

extern "C" const char* mblast_last_error(void) { return g_err; }
