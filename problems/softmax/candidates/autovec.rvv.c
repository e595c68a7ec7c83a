// softmax — compiler baseline for rvv: plain C, no intrinsics, built like every rvv candidate
// (clang -O3 for the target's -march, no fast-math): libm expf per element (a scalar call) and
// a scalar max (a NaN-exact select); of the three loops clang vectorises only the division.
#include <math.h>

#include <mblast/abi.h>

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)params, (void)n_params;
  if (n_inputs != 1 || n_outputs != 1 || inputs[0].ndim != 2 || inputs[0].nbytes != outputs[0].nbytes) return 1;
  const size_t rows = (size_t)inputs[0].shape[0], cols = (size_t)inputs[0].shape[1];
  for (size_t i = 0; i < rows; ++i) {
    const float* restrict x = (const float*)inputs[0].data + i * cols;
    float* restrict y = (float*)outputs[0].data + i * cols;
    float max = x[0];
    for (size_t j = 1; j < cols; ++j) max = x[j] > max ? x[j] : max;
    float sum = 0.0f;
    for (size_t j = 0; j < cols; ++j) {
      y[j] = expf(x[j] - max);
      sum += y[j];
    }
    for (size_t j = 0; j < cols; ++j) y[j] /= sum;
  }
  return 0;
}
