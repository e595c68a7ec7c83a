// 28_cumsum — naive RVV candidate: inclusive prefix sum along the last dim of x [rows, cols] (the
//   file's DIM = -1). Vectorised across rows: a strip of rows walks the columns together, each
//   column loaded and stored with a row stride (vlse32 / vsse32); the running sums are kept in
//   double (vfwadd.wv), since a float running sum over thousands of signed terms drifts by more than
//   the tolerance where the prefix passes near zero.
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
  if (n_inputs != 1 || n_params != 0 || n_outputs != 1 || !is_f32(&inputs[0], "in0", 2) ||
      !is_f32(&outputs[0], "out0", 2) || outputs[0].shape[0] != inputs[0].shape[0] ||
      outputs[0].shape[1] != inputs[0].shape[1]) {
    g_error = "expected in0 [rows, cols] and out0 of the same shape (f32)";
    return 1;
  }
  const size_t rows = (size_t)inputs[0].shape[0], cols = (size_t)inputs[0].shape[1];
  const ptrdiff_t row_stride = (ptrdiff_t)(cols * sizeof(float));
  for (size_t r0 = 0, vl; r0 < rows; r0 += vl) {
    vl = __riscv_vsetvl_e32m2(rows - r0);
    const float* x = (const float*)inputs[0].data + r0 * cols;
    float* y = (float*)outputs[0].data + r0 * cols;
    vfloat64m4_t acc = __riscv_vfmv_v_f_f64m4(0.0, vl);
    for (size_t j = 0; j < cols; ++j) {
      acc = __riscv_vfwadd_wv_f64m4(acc, __riscv_vlse32_v_f32m2(x + j, row_stride, vl), vl);
      __riscv_vsse32_v_f32m2(y + j, row_stride, __riscv_vfncvt_f_f_w_f32m2(acc, vl), vl);
    }
  }
  return 0;
}
