// 06_conv2d_3x3 — naive RVV candidate: direct 2D convolution, NCHW input, KCRS weight, stride 1,
//   zero padding R/2 (the module's kernel // 2), plus bias. Each output row y[n, k, p, :] is the
//   accumulator in memory: it starts at bias[k], then for every (c, r, s) the strip of outputs
//   whose input column lies inside the image gets weight[k, c, r, s] * x[n, c, h, q + s - pad]
//   (unit-stride loads, vfmacc.vf at LMUL 4); padding is never read.
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/abi.h>
#include <riscv_vector.h>
#include <string.h>

static const char* g_error = "";
const char* mblast_last_error(void) { return g_error; }

// True when t is a float32 tensor of `ndim` positive dims whose buffer holds exactly its elements
// (and, when the runner names it, is called `name`).
__attribute__((unused)) static int is_f32(const mblast_tensor* t, const char* name, int ndim) {
  if (t->dtype != MBLAST_F32 || t->ndim != ndim || !t->data) return 0;
  if (t->name && strcmp(t->name, name) != 0) return 0;
  size_t n = 1;
  for (int d = 0; d < ndim; ++d) {
    if (t->shape[d] <= 0) return 0;
    n *= (size_t)t->shape[d];
  }
  return t->nbytes == n * sizeof(float);
}

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state;
  if (n_inputs != 1 || n_params != 2 || n_outputs != 1 || !is_f32(&inputs[0], "in0", 4) ||
      !is_f32(&params[0], "conv.weight", 4) || !is_f32(&params[1], "conv.bias", 1) ||
      !is_f32(&outputs[0], "out0", 4)) {
    g_error = "expected in0 [N, C, H, W], conv.weight [K, C, R, S], conv.bias [K] and out0 (f32)";
    return 1;
  }
  const long N = inputs[0].shape[0], C = inputs[0].shape[1], H = inputs[0].shape[2], W = inputs[0].shape[3];
  const long K = params[0].shape[0], R = params[0].shape[2], S = params[0].shape[3];
  const long pad_h = R / 2, pad_w = S / 2;
  const long P = H + 2 * pad_h - R + 1, Q = W + 2 * pad_w - S + 1;
  if (params[0].shape[1] != C || params[1].shape[0] != K || P <= 0 || Q <= 0 || outputs[0].shape[0] != N ||
      outputs[0].shape[1] != K || outputs[0].shape[2] != P || outputs[0].shape[3] != Q) {
    g_error = "shapes do not fit: expected conv.weight [K, C, R, S], conv.bias [K], out0 [N, K, P, Q]";
    return 1;
  }
  const float* x = (const float*)inputs[0].data;
  const float* weight = (const float*)params[0].data;
  const float* bias = (const float*)params[1].data;
  float* y = (float*)outputs[0].data;
  for (long n = 0; n < N; ++n)
    for (long k = 0; k < K; ++k)
      for (long p = 0; p < P; ++p) {
        float* yrow = y + ((n * K + k) * P + p) * Q;
        for (long q = 0, vl; q < Q; q += vl) {
          vl = (long)__riscv_vsetvl_e32m4((size_t)(Q - q));
          __riscv_vse32_v_f32m4(yrow + q, __riscv_vfmv_v_f_f32m4(bias[k], (size_t)vl), (size_t)vl);
        }
        for (long c = 0; c < C; ++c)
          for (long r = 0; r < R; ++r) {
            const long h = p - pad_h + r;
            if (h < 0 || h >= H) continue;
            const float* xrow = x + ((n * C + c) * H + h) * W;
            for (long s = 0; s < S; ++s) {
              const float wt = weight[((k * C + c) * R + r) * S + s];
              // outputs q whose input column q + s - pad_w lies in [0, W)
              const long q0 = pad_w - s > 0 ? pad_w - s : 0;
              const long q1 = W + pad_w - s < Q ? W + pad_w - s : Q;
              for (long q = q0, vl; q < q1; q += vl) {
                vl = (long)__riscv_vsetvl_e32m4((size_t)(q1 - q));
                vfloat32m4_t acc = __riscv_vle32_v_f32m4(yrow + q, (size_t)vl);
                const vfloat32m4_t in = __riscv_vle32_v_f32m4(xrow + q + s - pad_w, (size_t)vl);
                acc = __riscv_vfmacc_vf_f32m4(acc, wt, in, (size_t)vl);
                __riscv_vse32_v_f32m4(yrow + q, acc, (size_t)vl);
              }
            }
          }
      }
  return 0;
}
