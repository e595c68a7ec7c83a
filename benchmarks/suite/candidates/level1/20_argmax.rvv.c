// 20_argmax — naive RVV candidate: y[r] = index of the largest x[r, j] (the first one on ties, as
//   torch.argmax) for x [rows, cols] f32, y [rows] int64; row by row, two strip-mined passes at
//   LMUL 4: the maximum (vfredmax), then the first position holding it (vmfeq + vfirst).
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
      outputs[0].dtype != MBLAST_I64 || outputs[0].ndim != 1 || outputs[0].shape[0] != inputs[0].shape[0] ||
      outputs[0].nbytes != (size_t)inputs[0].shape[0] * sizeof(int64_t) || !outputs[0].data) {
    g_error = "expected in0 [rows, cols] (f32) and out0 [rows] (int64)";
    return 1;
  }
  const size_t rows = (size_t)inputs[0].shape[0], cols = (size_t)inputs[0].shape[1];
  int64_t* y = (int64_t*)outputs[0].data;
  for (size_t i = 0; i < rows; ++i) {
    const float* x = (const float*)inputs[0].data + i * cols;
    vfloat32m1_t acc = __riscv_vfmv_s_f_f32m1(-__builtin_inff(), 1);
    for (size_t j = 0, vl; j < cols; j += vl) {
      vl = __riscv_vsetvl_e32m4(cols - j);
      acc = __riscv_vfredmax_vs_f32m4_f32m1(__riscv_vle32_v_f32m4(x + j, vl), acc, vl);
    }
    const float max = __riscv_vfmv_f_s_f32m1_f32(acc);
    int64_t best = 0;
    for (size_t j = 0, vl; j < cols; j += vl) {
      vl = __riscv_vsetvl_e32m4(cols - j);
      const long first = __riscv_vfirst_m_b8(__riscv_vmfeq_vf_f32m4_b8(__riscv_vle32_v_f32m4(x + j, vl), max, vl), vl);
      if (first >= 0) {
        best = (int64_t)(j + (size_t)first);
        break;
      }
    }
    y[i] = best;
  }
  return 0;
}
