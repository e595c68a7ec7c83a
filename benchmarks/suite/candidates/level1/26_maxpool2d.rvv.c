// 26_maxpool2d — naive RVV candidate: 2D max pooling on x [N, C, H, W], kernel 3, stride 2,
//   padding 1 (the file's constructor arguments, the same at both sizes). Each output row starts
//   at -inf; for every window offset (r, s) the outputs whose input column lies inside the image
//   take the max with a stride-2 load (vlse32) of that input row; padding is never read.
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

#define KSIZE 3
#define STRIDE 2
#define PAD 1

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)params;
  if (n_inputs != 1 || n_params != 0 || n_outputs != 1 || !is_f32(&inputs[0], "in0", 4) ||
      !is_f32(&outputs[0], "out0", 4)) {
    g_error = "expected in0 [N, C, H, W] and out0 (f32)";
    return 1;
  }
  const long N = inputs[0].shape[0], C = inputs[0].shape[1], H = inputs[0].shape[2], W = inputs[0].shape[3];
  const long P = (H + 2 * PAD - KSIZE) / STRIDE + 1, Q = (W + 2 * PAD - KSIZE) / STRIDE + 1;
  if (outputs[0].shape[0] != N || outputs[0].shape[1] != C || outputs[0].shape[2] != P || outputs[0].shape[3] != Q) {
    g_error = "out0 must be [N, C, (H - 1) / 2 + 1, (W - 1) / 2 + 1]";
    return 1;
  }
  const float* x = (const float*)inputs[0].data;
  float* y = (float*)outputs[0].data;
  for (long nc = 0; nc < N * C; ++nc)
    for (long p = 0; p < P; ++p) {
      float* yrow = y + (nc * P + p) * Q;
      for (long q = 0, vl; q < Q; q += vl) {
        vl = (long)__riscv_vsetvl_e32m4((size_t)(Q - q));
        __riscv_vse32_v_f32m4(yrow + q, __riscv_vfmv_v_f_f32m4(-__builtin_inff(), (size_t)vl), (size_t)vl);
      }
      for (long r = 0; r < KSIZE; ++r) {
        const long h = p * STRIDE - PAD + r;
        if (h < 0 || h >= H) continue;
        const float* xrow = x + (nc * H + h) * W;
        for (long s = 0; s < KSIZE; ++s) {
          long q0 = 0, q1 = Q;  // outputs q whose input column q * STRIDE - PAD + s lies in [0, W)
          while (q0 < Q && q0 * STRIDE - PAD + s < 0) ++q0;
          while (q1 > q0 && (q1 - 1) * STRIDE - PAD + s >= W) --q1;
          for (long q = q0, vl; q < q1; q += vl) {
            vl = (long)__riscv_vsetvl_e32m4((size_t)(q1 - q));
            const vfloat32m4_t v =
                __riscv_vlse32_v_f32m4(xrow + q * STRIDE - PAD + s, STRIDE * sizeof(float), (size_t)vl);
            const vfloat32m4_t m = __riscv_vfmax_vv_f32m4(__riscv_vle32_v_f32m4(yrow + q, (size_t)vl), v, (size_t)vl);
            __riscv_vse32_v_f32m4(yrow + q, m, (size_t)vl);
          }
        }
      }
    }
  return 0;
}
