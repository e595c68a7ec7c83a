// 26_maxpool2d — naive OpenCL candidate: 2D max pooling on x [N, C, H, W], kernel 3, stride 2,
//   padding 1 (the file's constructor arguments, the same at both sizes; padding never wins the
//   max); one work-item per output element, its window read straight from global memory.
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/opencl_candidate.h>

#define KSIZE 3
#define STRIDE 2
#define PAD 1

static const char* kSource = R"CLC(
#define KSIZE 3
#define STRIDE 2
#define PAD 1

__kernel void maxpool2d(__global const float* restrict x, __global float* restrict y, const long NC, const long H,
                        const long W, const long P, const long Q) {
  const long idx = (long)get_global_id(0);
  if (idx >= NC * P * Q) return;
  const long q = idx % Q, p = (idx / Q) % P, nc = idx / (P * Q);
  __global const float* plane = x + nc * H * W;
  float m = -INFINITY;
  for (long r = 0; r < KSIZE; ++r) {
    const long h = p * STRIDE - PAD + r;
    if (h < 0 || h >= H) continue;
    for (long s = 0; s < KSIZE; ++s) {
      const long w = q * STRIDE - PAD + s;
      if (w >= 0 && w < W) m = fmax(m, plane[h * W + w]);
    }
  }
  y[idx] = m;
}
)CLC";

static int enqueue(const mblast_context* ctx, cl_kernel k, const mblast_tensor* in, int32_t n_in,
                   const mblast_tensor* par, int32_t n_par, mblast_tensor* out, int32_t n_out) {
  (void)par;
  if (!mblast_cl::expect_counts(n_in, 1, n_par, 0, n_out, 1)) return -1;
  if (!mblast_cl::expect_f32(in[0], "in0", 4) || !mblast_cl::expect_f32(out[0], "out0", 4)) return -1;
  const cl_long N = in[0].shape[0], C = in[0].shape[1], H = in[0].shape[2], W = in[0].shape[3];
  const cl_long P = (H + 2 * PAD - KSIZE) / STRIDE + 1, Q = (W + 2 * PAD - KSIZE) / STRIDE + 1;
  if (out[0].shape[0] != N || out[0].shape[1] != C || out[0].shape[2] != P || out[0].shape[3] != Q)
    return mblast_cl::fail("out0 must be [%lld, %lld, %lld, %lld]",
                           (long long)N, (long long)C, (long long)P, (long long)Q);
  const size_t global = static_cast<size_t>(N * C * P * Q);
  return mblast_cl::launch(ctx, k, 1, &global, static_cast<cl_mem>(in[0].data), static_cast<cl_mem>(out[0].data),
                           static_cast<cl_long>(N * C), H, W, P, Q);
}

MBLAST_OPENCL_CANDIDATE(kSource, "maxpool2d", enqueue)
