// matmul — naive RVV candidate: c[i, j] = sum_k a[i, k] * w[k, j] with a [M, K], w [K, N]
// row-major. For each row of c, a strip of columns (LMUL 4) accumulates a[i, k] * w[k, strip]
// over k with vfmacc.vf: unit-stride loads of w, no blocking, no reuse beyond one strip.
// The starting point the optimizer improves: simple, correct, nothing clever.
#include <mblast/abi.h>
#include <riscv_vector.h>

static const char* g_error = "";
const char* mblast_last_error(void) { return g_error; }

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state;
  if (n_inputs != 1 || n_params != 1 || n_outputs != 1 || inputs[0].ndim != 2 || params[0].ndim != 2 ||
      params[0].shape[0] != inputs[0].shape[1] || outputs[0].shape[0] != inputs[0].shape[0] ||
      outputs[0].shape[1] != params[0].shape[1]) {
    g_error = "expected a [M, K], w [K, N] and c [M, N]";
    return 1;
  }
  const size_t M = (size_t)inputs[0].shape[0], K = (size_t)inputs[0].shape[1], N = (size_t)params[0].shape[1];
  const float* a = (const float*)inputs[0].data;
  const float* w = (const float*)params[0].data;
  float* c = (float*)outputs[0].data;
  for (size_t i = 0; i < M; ++i) {
    for (size_t j = 0, vl; j < N; j += vl) {
      vl = __riscv_vsetvl_e32m4(N - j);
      vfloat32m4_t acc = __riscv_vfmv_v_f_f32m4(0.0f, vl);
      for (size_t k = 0; k < K; ++k)
        acc = __riscv_vfmacc_vf_f32m4(acc, a[i * K + k], __riscv_vle32_v_f32m4(w + k * N + j, vl), vl);
      __riscv_vse32_v_f32m4(c + i * N + j, acc, vl);
    }
  }
  return 0;
}
