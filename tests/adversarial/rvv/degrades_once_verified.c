// degrades_once_verified — a correct vec_add for the verification runs (the first 6 calls); from
// then on it computes only the even elements and copies each to its odd neighbour: every element
// is written (no poison left), half the work is done, and the values are wrong. Only a check of
// the timed calls' values sees it: mblast's spot check, in a fresh process, must report
// "wrong_output".
#include <mblast/abi.h>

static int g_calls;

int mblast_run(const mblast_context* ctx, void* state, const mblast_tensor* inputs, int32_t n_inputs,
               const mblast_tensor* params, int32_t n_params, mblast_tensor* outputs, int32_t n_outputs) {
  (void)ctx, (void)state, (void)n_inputs, (void)params, (void)n_params, (void)n_outputs;
  const float* a = (const float*)inputs[0].data;
  const float* b = (const float*)inputs[1].data;
  float* y = (float*)outputs[0].data;
  const size_t n = outputs[0].nbytes / sizeof(float);
  if (++g_calls <= 6) {
    for (size_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
    return 0;
  }
  for (size_t i = 0; i < n; i += 2) {  // THE CHEAT: verified by now
    const float v = a[i] + b[i];
    y[i] = v;
    if (i + 1 < n) y[i + 1] = v;
  }
  return 0;
}
