// vec_add — compiler baseline for rvv: plain C, no intrinsics. The rvv backend builds every
// candidate with clang -O3 for the target's -march, so this is what clang's auto-vectoriser
// makes of the obvious loop.
#include <mblast/abi.h>

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)params, (void)n_params;
  if (n_inputs != 2 || n_outputs != 1) return 1;
  const float* restrict a = (const float*)inputs[0].data;
  const float* restrict b = (const float*)inputs[1].data;
  float* restrict y = (float*)outputs[0].data;
  const size_t n = outputs[0].nbytes / sizeof(float);
  for (size_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
  return 0;
}
