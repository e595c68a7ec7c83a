// conv2d — naive RVV candidate: NCHW direct convolution, stride 1, zero padding (R-1)/2,
//   y[n, k, p, q] = bias[k] + sum_{c, r, s} weight[k, c, r, s] * x[n, c, p + r - pad, q + s - pad].
// Vectorised along the output row q (LMUL 4): each input row is loaded once per (c, r) and its
// left/right neighbours come from vfslide1up/vfslide1down with the padding zero at the edges.
// Written for 3x3 filters (the problem's); other sizes are refused.
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/abi.h>
#include <riscv_vector.h>

static const char* g_error = "";
const char* mblast_last_error(void) { return g_error; }

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state;
  if (n_inputs != 1 || n_params != 2 || n_outputs != 1 || inputs[0].ndim != 4 || params[0].ndim != 4) {
    g_error = "expected x [N, C, H, W], weight [K, C, 3, 3], bias [K] and y [N, K, H, W]";
    return 1;
  }
  const long N = inputs[0].shape[0], C = inputs[0].shape[1], H = inputs[0].shape[2], W = inputs[0].shape[3];
  const long K = params[0].shape[0];
  if (params[0].shape[1] != C || params[0].shape[2] != 3 || params[0].shape[3] != 3 || params[1].shape[0] != K ||
      outputs[0].shape[0] != N || outputs[0].shape[1] != K || outputs[0].shape[2] != H || outputs[0].shape[3] != W) {
    g_error = "expected x [N, C, H, W], weight [K, C, 3, 3], bias [K] and y [N, K, H, W]";
    return 1;
  }
  const float* x = (const float*)inputs[0].data;
  const float* weight = (const float*)params[0].data;
  const float* bias = (const float*)params[1].data;
  float* y = (float*)outputs[0].data;
  for (long n = 0; n < N; ++n)
    for (long k = 0; k < K; ++k)
      for (long p = 0; p < H; ++p)
        for (long q = 0, vl; q < W; q += vl) {
          vl = (long)__riscv_vsetvl_e32m4((size_t)(W - q));
          vfloat32m4_t acc = __riscv_vfmv_v_f_f32m4(bias[k], vl);
          for (long c = 0; c < C; ++c)
            for (long r = 0; r < 3; ++r) {
              const long h = p + r - 1;
              if (h < 0 || h >= H) continue;  // a padding row: all zeros
              const float* row = x + ((n * C + c) * H + h) * W;
              const float* wt = weight + ((k * C + c) * 3 + r) * 3;
              vfloat32m4_t mid = __riscv_vle32_v_f32m4(row + q, vl);
              vfloat32m4_t left = __riscv_vfslide1up_vf_f32m4(mid, q > 0 ? row[q - 1] : 0.0f, vl);
              vfloat32m4_t right = __riscv_vfslide1down_vf_f32m4(mid, q + vl < W ? row[q + vl] : 0.0f, vl);
              acc = __riscv_vfmacc_vf_f32m4(acc, wt[0], left, vl);
              acc = __riscv_vfmacc_vf_f32m4(acc, wt[1], mid, vl);
              acc = __riscv_vfmacc_vf_f32m4(acc, wt[2], right, vl);
            }
          __riscv_vse32_v_f32m4(y + ((n * K + k) * H + p) * W + q, acc, vl);
        }
  return 0;
}
