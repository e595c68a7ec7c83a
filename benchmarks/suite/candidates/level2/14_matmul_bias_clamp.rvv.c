// 14_matmul_bias_clamp — naive RVV candidate: out = clamp(A @ B + bias, -8, 8) for A [M, K],
//   B [K, N], bias [N] (the bounds are the file's constructor arguments, the same at both sizes).
//   For each row, a strip of columns (LMUL 4) accumulates a[i, k] * b[k, strip] over k with
//   vfmacc.vf, then adds the bias strip and clamps.
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

#define CLAMP_MIN -8.0f
#define CLAMP_MAX 8.0f

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state;
  if (n_inputs != 2 || n_params != 1 || n_outputs != 1 || !is_f32(&inputs[0], "in0", 2) ||
      !is_f32(&inputs[1], "in1", 2) || !is_f32(&params[0], "bias", 1) || !is_f32(&outputs[0], "out0", 2) ||
      inputs[1].shape[0] != inputs[0].shape[1] || params[0].shape[0] != inputs[1].shape[1] ||
      outputs[0].shape[0] != inputs[0].shape[0] || outputs[0].shape[1] != inputs[1].shape[1]) {
    g_error = "expected in0 [M, K], in1 [K, N], bias [N] and out0 [M, N] (f32)";
    return 1;
  }
  const size_t M = (size_t)inputs[0].shape[0], K = (size_t)inputs[0].shape[1], N = (size_t)inputs[1].shape[1];
  const float* a = (const float*)inputs[0].data;
  const float* b = (const float*)inputs[1].data;
  const float* bias = (const float*)params[0].data;
  float* c = (float*)outputs[0].data;
  for (size_t i = 0; i < M; ++i)
    for (size_t j = 0, vl; j < N; j += vl) {
      vl = __riscv_vsetvl_e32m4(N - j);
      vfloat32m4_t acc = __riscv_vfmv_v_f_f32m4(0.0f, vl);
      for (size_t k = 0; k < K; ++k)
        acc = __riscv_vfmacc_vf_f32m4(acc, a[i * K + k], __riscv_vle32_v_f32m4(b + k * N + j, vl), vl);
      acc = __riscv_vfadd_vv_f32m4(acc, __riscv_vle32_v_f32m4(bias + j, vl), vl);
      acc = __riscv_vfmin_vf_f32m4(__riscv_vfmax_vf_f32m4(acc, CLAMP_MIN, vl), CLAMP_MAX, vl);
      __riscv_vse32_v_f32m4(c + i * N + j, acc, vl);
    }
  return 0;
}
