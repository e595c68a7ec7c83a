// matmul — compiler baseline for rvv: plain C, no intrinsics, built like every rvv candidate
// (clang -O3 for the target's -march, no fast-math). The i-k-j loop order every C programmer
// uses for row-major GEMM: the inner loop is an axpy over a row of w, which clang vectorises
// without reassociating any sum (each c[i, j] still adds its K products in order).
#include <mblast/abi.h>

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state;
  if (n_inputs != 1 || n_params != 1 || n_outputs != 1 || inputs[0].ndim != 2 || params[0].ndim != 2 ||
      params[0].shape[0] != inputs[0].shape[1] || outputs[0].shape[0] != inputs[0].shape[0] ||
      outputs[0].shape[1] != params[0].shape[1])
    return 1;
  const size_t M = (size_t)inputs[0].shape[0], K = (size_t)inputs[0].shape[1], N = (size_t)params[0].shape[1];
  const float* restrict a = (const float*)inputs[0].data;
  const float* restrict w = (const float*)params[0].data;
  float* restrict c = (float*)outputs[0].data;
  for (size_t i = 0; i < M; ++i) {
    float* restrict ci = c + i * N;
    for (size_t j = 0; j < N; ++j) ci[j] = 0.0f;
    for (size_t k = 0; k < K; ++k) {
      const float aik = a[i * K + k];
      const float* restrict wk = w + k * N;
      for (size_t j = 0; j < N; ++j) ci[j] += aik * wk[j];
    }
  }
  return 0;
}
