// act_chain — compiler baseline for rvv: plain C, no intrinsics, built like every rvv candidate
// (clang -O3 for the target's -march, no fast-math). libm's tanhf has no vector variant here,
// so the loop makes one scalar call per element.
#include <math.h>

#include <mblast/abi.h>

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state;
  if (n_inputs != 1 || n_params != 1 || n_outputs != 1 || inputs[0].ndim != 2 ||
      params[0].shape[0] != inputs[0].shape[1] || inputs[0].nbytes != outputs[0].nbytes)
    return 1;
  const size_t rows = (size_t)inputs[0].shape[0], cols = (size_t)inputs[0].shape[1];
  const float* restrict x = (const float*)inputs[0].data;
  const float* restrict scale = (const float*)params[0].data;
  float* restrict y = (float*)outputs[0].data;
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j) {
      const float v = x[i * cols + j];
      const float lrelu = v > 0.0f ? v : 0.1f * v;
      y[i * cols + j] = tanhf(lrelu * scale[j]) + 0.5f * v;
    }
  return 0;
}
