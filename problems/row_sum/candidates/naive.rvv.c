// row_sum — naive RVV candidate: y[i] = sum_j x[i, j]. Each row is strip-mined at LMUL 8 and
// every strip is folded into the running sum with an unordered reduction (vfredusum).
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/abi.h>
#include <riscv_vector.h>

static const char* g_error = "";
const char* mblast_last_error(void) { return g_error; }

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)params, (void)n_params;
  if (n_inputs != 1 || n_outputs != 1 || inputs[0].ndim != 2 || outputs[0].shape[0] != inputs[0].shape[0]) {
    g_error = "expected x [rows, cols] and y [rows]";
    return 1;
  }
  const size_t rows = (size_t)inputs[0].shape[0], cols = (size_t)inputs[0].shape[1];
  const float* x = (const float*)inputs[0].data;
  float* y = (float*)outputs[0].data;
  for (size_t i = 0; i < rows; ++i) {
    const float* row = x + i * cols;
    vfloat32m1_t sum = __riscv_vfmv_s_f_f32m1(0.0f, 1);
    for (size_t j = 0, vl; j < cols; j += vl) {
      vl = __riscv_vsetvl_e32m8(cols - j);
      vfloat32m8_t v = __riscv_vle32_v_f32m8(row + j, vl);
      sum = __riscv_vfredusum_vs_f32m8_f32m1(v, sum, vl);
    }
    y[i] = __riscv_vfmv_f_s_f32m1_f32(sum);
  }
  return 0;
}
