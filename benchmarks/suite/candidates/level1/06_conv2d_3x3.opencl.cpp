// 06_conv2d_3x3 — naive OpenCL candidate: direct 2D convolution, NCHW input, KCRS weight, stride 1,
//   zero padding R/2 (the module's kernel // 2), plus bias; one work-item per output element
//   (n, k, p, q), its sum over C x R x S read straight from global memory.
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/opencl_candidate.h>

static const char* kSource = R"CLC(
__kernel void conv2d(__global const float* restrict x,       // [N, C, H, W]
                     __global const float* restrict weight,  // [K, C, R, S]
                     __global const float* restrict bias,    // [K]
                     __global float* restrict y,             // [N, K, P, Q]
                     const int N, const int C, const int H, const int W,
                     const int K, const int R, const int S, const int P, const int Q) {
  const long idx = (long)get_global_id(0);
  if (idx >= (long)N * K * P * Q) return;
  const int q = (int)(idx % Q);
  const int p = (int)((idx / Q) % P);
  const int k = (int)((idx / ((long)Q * P)) % K);
  const int n = (int)(idx / ((long)Q * P * K));
  const int pad_h = R / 2, pad_w = S / 2;
  float acc = bias[k];
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r) {
      const int h = p - pad_h + r;
      if (h < 0 || h >= H) continue;
      for (int s = 0; s < S; ++s) {
        const int w = q - pad_w + s;
        if (w < 0 || w >= W) continue;
        acc += x[(((long)n * C + c) * H + h) * W + w] * weight[(((long)k * C + c) * R + r) * S + s];
      }
    }
  y[idx] = acc;
}
)CLC";

// Checks that a tensor has the given name (the documented parameter order).
static bool expect_name(const mblast_tensor& t, const char* name) {
  if (!t.name || std::strcmp(t.name, name) == 0) return true;
  return mblast_cl::fail("expected tensor '%s' in this position, got '%s'", name, t.name), false;
}

static int enqueue(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in, int32_t n_in,
                   const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  if (!mblast_cl::expect_counts(n_in, 1, n_par, 2, n_out, 1)) return -1;
  if (!expect_name(par[0], "conv.weight") || !expect_name(par[1], "conv.bias")) return -1;
  if (!mblast_cl::expect_f32(in[0], "in0", 4) || !mblast_cl::expect_f32(par[0], "conv.weight", 4) ||
      !mblast_cl::expect_f32(par[1], "conv.bias", 1) || !mblast_cl::expect_f32(out[0], "out0", 4))
    return -1;
  const int64_t N = in[0].shape[0], C = in[0].shape[1], H = in[0].shape[2], W = in[0].shape[3];
  const int64_t K = par[0].shape[0], R = par[0].shape[2], S = par[0].shape[3];
  const int64_t P = H + 2 * (R / 2) - R + 1, Q = W + 2 * (S / 2) - S + 1;
  if (par[0].shape[1] != C)
    return mblast_cl::fail("conv.weight has %lld input channels, in0 has %lld",
                           (long long)par[0].shape[1], (long long)C);
  if (par[1].shape[0] != K) return mblast_cl::fail("conv.bias must have %lld entries", (long long)K);
  if (P <= 0 || Q <= 0 || out[0].shape[0] != N || out[0].shape[1] != K || out[0].shape[2] != P || out[0].shape[3] != Q)
    return mblast_cl::fail("out0 must be [%lld, %lld, %lld, %lld]",
                           (long long)N, (long long)K, (long long)P, (long long)Q);
  for (int64_t d : {N, C, H, W, K, R, S, P, Q})
    if (d > 0x7fffffff) return mblast_cl::fail("a dimension is too large for this kernel");
  auto i32 = [](int64_t v) { return static_cast<cl_int>(v); };
  const size_t global = static_cast<size_t>(N * K * P * Q);
  return mblast_cl::launch(ctx, k, 1, &global, static_cast<cl_mem>(in[0].data), static_cast<cl_mem>(par[0].data),
                           static_cast<cl_mem>(par[1].data), static_cast<cl_mem>(out[0].data), i32(N), i32(C), i32(H),
                           i32(W), i32(K), i32(R), i32(S), i32(P), i32(Q));
}

MBLAST_OPENCL_CANDIDATE(kSource, "conv2d", enqueue)
