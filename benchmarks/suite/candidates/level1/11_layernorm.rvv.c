// 11_layernorm — naive RVV candidate: LayerNorm over the last dim of x [rows, cols], eps 1e-5 (the
//   file's constant), y = (x - mean) / sqrt(var + eps) * weight + bias with the biased variance;
//   row by row, three strip-mined passes at LMUL 4 (sum, squared deviations, normalise).
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
#include <math.h>

#define EPS 1e-5f

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state;
  if (n_inputs != 1 || n_params != 2 || n_outputs != 1 || !is_f32(&inputs[0], "in0", 2) ||
      !is_f32(&params[0], "norm.weight", 1) || !is_f32(&params[1], "norm.bias", 1) ||
      !is_f32(&outputs[0], "out0", 2) || params[0].shape[0] != inputs[0].shape[1] ||
      params[1].shape[0] != inputs[0].shape[1] || outputs[0].shape[0] != inputs[0].shape[0] ||
      outputs[0].shape[1] != inputs[0].shape[1]) {
    g_error = "expected in0 [rows, cols], norm.weight [cols], norm.bias [cols] and out0 [rows, cols] (f32)";
    return 1;
  }
  const size_t rows = (size_t)inputs[0].shape[0], cols = (size_t)inputs[0].shape[1];
  const float* weight = (const float*)params[0].data;
  const float* bias = (const float*)params[1].data;
  for (size_t i = 0; i < rows; ++i) {
    const float* x = (const float*)inputs[0].data + i * cols;
    float* y = (float*)outputs[0].data + i * cols;
    vfloat32m1_t acc = __riscv_vfmv_s_f_f32m1(0.0f, 1);
    for (size_t j = 0, vl; j < cols; j += vl) {
      vl = __riscv_vsetvl_e32m4(cols - j);
      acc = __riscv_vfredusum_vs_f32m4_f32m1(__riscv_vle32_v_f32m4(x + j, vl), acc, vl);
    }
    const float mean = __riscv_vfmv_f_s_f32m1_f32(acc) / (float)cols;
    acc = __riscv_vfmv_s_f_f32m1(0.0f, 1);
    for (size_t j = 0, vl; j < cols; j += vl) {
      vl = __riscv_vsetvl_e32m4(cols - j);
      const vfloat32m4_t d = __riscv_vfsub_vf_f32m4(__riscv_vle32_v_f32m4(x + j, vl), mean, vl);
      acc = __riscv_vfredusum_vs_f32m4_f32m1(__riscv_vfmul_vv_f32m4(d, d, vl), acc, vl);
    }
    const float rstd = 1.0f / sqrtf(__riscv_vfmv_f_s_f32m1_f32(acc) / (float)cols + EPS);
    for (size_t j = 0, vl; j < cols; j += vl) {
      vl = __riscv_vsetvl_e32m4(cols - j);
      vfloat32m4_t v = __riscv_vfsub_vf_f32m4(__riscv_vle32_v_f32m4(x + j, vl), mean, vl);
      v = __riscv_vfmul_vf_f32m4(v, rstd, vl);
      v = __riscv_vfmadd_vv_f32m4(v, __riscv_vle32_v_f32m4(weight + j, vl), __riscv_vle32_v_f32m4(bias + j, vl), vl);
      __riscv_vse32_v_f32m4(y + j, v, vl);
    }
  }
  return 0;
}
