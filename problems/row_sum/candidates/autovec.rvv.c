// row_sum — compiler baseline for rvv: plain C, no intrinsics, built like every rvv candidate
// (clang -O3 for the target's -march, no fast-math). Without reassociation clang must keep the
// sequential order of the sum; RVV can still vectorise it with the ordered reduction
// vfredosum, which is what clang emits here.
#include <mblast/abi.h>

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)params, (void)n_params;
  if (n_inputs != 1 || n_outputs != 1 || inputs[0].ndim != 2 || outputs[0].shape[0] != inputs[0].shape[0]) return 1;
  const size_t rows = (size_t)inputs[0].shape[0], cols = (size_t)inputs[0].shape[1];
  const float* restrict x = (const float*)inputs[0].data;
  float* restrict y = (float*)outputs[0].data;
  for (size_t i = 0; i < rows; ++i) {
    float s = 0.0f;
    for (size_t j = 0; j < cols; ++j) s += x[i * cols + j];
    y[i] = s;
  }
  return 0;
}
