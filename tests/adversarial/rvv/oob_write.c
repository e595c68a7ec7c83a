// oob_write — computes y = a + b, then writes 256 elements past the end of y. The rvv Device
// keeps guard bytes around every buffer: failure_kind "out_of_bounds_write".
#include <mblast/abi.h>

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)n_inputs, (void)params, (void)n_params, (void)n_outputs;
  const float* a = (const float*)inputs[0].data;
  const float* b = (const float*)inputs[1].data;
  float* y = (float*)outputs[0].data;
  const size_t n = outputs[0].nbytes / sizeof(float);
  for (size_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
  for (size_t i = n; i < n + 256; ++i) y[i] = 42.0f;
  return 0;
}
