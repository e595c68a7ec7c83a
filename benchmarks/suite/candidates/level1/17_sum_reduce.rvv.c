// 17_sum_reduce — naive RVV candidate: y[b, c] = sum_r x[b, r, c] for x [B, R, C] (the sum over the
//   middle dim, the file's DIM = 1); for each b, a strip of columns accumulates the R rows with
//   unit-stride loads (f32 at LMUL 4) into double sums (vfwadd.wv, f64 at LMUL 8): over R = 4096
//   signed values (the full size) a float running sum drifts past the tolerance where it nearly
//   cancels.
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
  (void)ctx, (void)state, (void)params;
  if (n_inputs != 1 || n_params != 0 || n_outputs != 1 || !is_f32(&inputs[0], "in0", 3) ||
      !is_f32(&outputs[0], "out0", 2) || outputs[0].shape[0] != inputs[0].shape[0] ||
      outputs[0].shape[1] != inputs[0].shape[2]) {
    g_error = "expected in0 [B, R, C] and out0 [B, C] (f32)";
    return 1;
  }
  const size_t B = (size_t)inputs[0].shape[0], R = (size_t)inputs[0].shape[1], C = (size_t)inputs[0].shape[2];
  const float* x = (const float*)inputs[0].data;
  float* y = (float*)outputs[0].data;
  for (size_t b = 0; b < B; ++b)
    for (size_t c = 0, vl; c < C; c += vl) {
      vl = __riscv_vsetvl_e32m4(C - c);
      vfloat64m8_t acc = __riscv_vfmv_v_f_f64m8(0.0, vl);
      for (size_t r = 0; r < R; ++r)
        acc = __riscv_vfwadd_wv_f64m8(acc, __riscv_vle32_v_f32m4(x + (b * R + r) * C + c, vl), vl);
      __riscv_vse32_v_f32m4(y + b * C + c, __riscv_vfncvt_f_f_w_f32m4(acc, vl), vl);
    }
  return 0;
}
