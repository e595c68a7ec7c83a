// 10_conv_transpose2d — naive CUDA candidate: transposed 2D convolution, x [N, Ci, H, W], weight
//   [Ci, Co, R, S] (PyTorch's ConvTranspose2d layout), stride 2, padding 1 (the file's constructor
//   arguments, the same at both sizes), plus bias. Gather form, one thread per output element:
//   y[n, o, oh, ow] = bias[o] + sum over (c, r, s) with oh = ih * 2 - 1 + r, ow = iw * 2 - 1 + s
//   of x[n, c, ih, iw] * weight[c, o, r, s].
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

#define STRIDE 2
#define PAD 1

__global__ void conv_transpose2d(const float* __restrict__ x,       // [N, Ci, H, W]
                                 const float* __restrict__ weight,  // [Ci, Co, R, S]
                                 const float* __restrict__ bias,    // [Co]
                                 float* __restrict__ y,             // [N, Co, OH, OW]
                                 int N, int Ci, int H, int W, int Co, int R, int S, int OH, int OW) {
  const long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (idx >= static_cast<long long>(N) * Co * OH * OW) return;
  const int ow = static_cast<int>(idx % OW);
  const int oh = static_cast<int>((idx / OW) % OH);
  const int o = static_cast<int>((idx / (static_cast<long long>(OW) * OH)) % Co);
  const int n = static_cast<int>(idx / (static_cast<long long>(OW) * OH * Co));
  float acc = bias[o];
  for (int c = 0; c < Ci; ++c)
    for (int r = 0; r < R; ++r) {
      const int th = oh + PAD - r;  // = ih * STRIDE
      if (th < 0 || th % STRIDE != 0 || th / STRIDE >= H) continue;
      const int ih = th / STRIDE;
      for (int s = 0; s < S; ++s) {
        const int tw = ow + PAD - s;
        if (tw < 0 || tw % STRIDE != 0 || tw / STRIDE >= W) continue;
        const int iw = tw / STRIDE;
        acc += x[((static_cast<long long>(n) * Ci + c) * H + ih) * W + iw] *
               weight[((static_cast<long long>(c) * Co + o) * R + r) * S + s];
      }
    }
  y[idx] = acc;
}

extern "C" int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
                          const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)state;
  if (!check_call(ctx, n_inputs, 1, n_params, 2, n_outputs, 1)) return -1;
  if (!check_f32(inputs[0], "in0", 4) || !check_f32(params[0], "deconv.weight", 4) ||
      !check_f32(params[1], "deconv.bias", 1) || !check_f32(outputs[0], "out0", 4))
    return -1;
  const long long N = inputs[0].shape[0], Ci = inputs[0].shape[1], H = inputs[0].shape[2], W = inputs[0].shape[3];
  const long long Co = params[0].shape[1], R = params[0].shape[2], S = params[0].shape[3];
  const long long OH = (H - 1) * STRIDE - 2 * PAD + R, OW = (W - 1) * STRIDE - 2 * PAD + S;
  if (params[0].shape[0] != Ci)
    FAIL("deconv.weight has %lld input channels, in0 has %lld", (long long)params[0].shape[0], Ci);
  if (params[1].shape[0] != Co) FAIL("deconv.bias must have %lld entries", Co);
  if (OH <= 0 || OW <= 0 || outputs[0].shape[0] != N || outputs[0].shape[1] != Co || outputs[0].shape[2] != OH ||
      outputs[0].shape[3] != OW)
    FAIL("out0 must be [%lld, %lld, %lld, %lld]", N, Co, OH, OW);
  for (long long d : {N, Ci, H, W, Co, R, S, OH, OW})
    if (d > 0x7fffffff) FAIL("a dimension is too large for this kernel");
  conv_transpose2d<<<blocks_for(N * Co * OH * OW, 256), 256, 0, stream_of(ctx)>>>(
      static_cast<const float*>(inputs[0].data), static_cast<const float*>(params[0].data),
      static_cast<const float*>(params[1].data), static_cast<float*>(outputs[0].data), static_cast<int>(N),
      static_cast<int>(Ci), static_cast<int>(H), static_cast<int>(W), static_cast<int>(Co), static_cast<int>(R),
      static_cast<int>(S), static_cast<int>(OH), static_cast<int>(OW));
  return launched("conv_transpose2d");
}

extern "C" const char* mblast_last_error(void) { return g_err; }
