// honest_until_timed — a correct vec_add on the first 6 calls (the verification runs: 3 seeds x 2
// runs), then returns at once on every later call. Every timed call's outputs are poisoned
// before it and fingerprinted after it, so mblast must report "unwritten_output".
#include <mblast/abi.h>

static int g_calls;

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)n_inputs, (void)params, (void)n_params, (void)n_outputs;
  if (++g_calls > 6) return 0;  // THE CHEAT: verified by now, "nobody checks the timed calls"
  const float* a = (const float*)inputs[0].data;
  const float* b = (const float*)inputs[1].data;
  float* y = (float*)outputs[0].data;
  const size_t n = outputs[0].nbytes / sizeof(float);
  for (size_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
  return 0;
}
