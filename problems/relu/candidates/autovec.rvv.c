// relu — compiler baseline for rvv: plain C, no intrinsics, built like every rvv candidate
// (clang -O3 for the target's -march): what the auto-vectoriser makes of the obvious loop.
#include <mblast/abi.h>

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)params, (void)n_params;
  if (n_inputs != 1 || n_outputs != 1 || inputs[0].nbytes != outputs[0].nbytes) return 1;
  const float* restrict x = (const float*)inputs[0].data;
  float* restrict y = (float*)outputs[0].data;
  const size_t n = outputs[0].nbytes / sizeof(float);
  for (size_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  return 0;
}
